/* The witness (docs/WITNESS.md): the record rules W1-W3 and W5 (wit_rec),
 * the state file (crash-safe, refused when damaged or of another cluster),
 * and the codec (every message round-trips; bad fields are refused). */
#include "unit.h"

#include <errno.h>
#include <fcntl.h>

#include "../../src/wit/wit_codec.h"
#include "../../src/wit/wit_rec.h"

static struct wit_vol_msg vmsg(uint32_t flags, uint64_t gen)
{
	struct wit_vol_msg m;
	memset(&m, 0, sizeof(m));
	snprintf(m.volume, sizeof(m.volume), "vol0");
	m.seq = 7;
	m.gen = gen;
	m.flags = flags;
	return m;
}

static void test_report_takes_free_record(void **st)
{
	struct wit_rec r = { .volume = "vol0" };
	struct wit_vol_msg m = vmsg(WIT_F_PRIMARY | WIT_F_SYNCED, 0x100);
	bool changed;
	(void)st;

	assert_int_equal(wit_rec_report(&r, "a", &m, &changed), WIT_R_OK);
	assert_true(changed);
	assert_string_equal(r.primary, "a");
	assert_true(r.synced);
	assert_int_equal(r.epoch, 1);
	/* the same report again changes nothing (no write of the state file) */
	assert_int_equal(wit_rec_report(&r, "a", &m, &changed), WIT_R_OK);
	assert_false(changed);
	/* another node reporting primary is deposed (W1), the record stays */
	assert_int_equal(wit_rec_report(&r, "b", &m, &changed), WIT_R_DEPOSED);
	assert_false(changed);
	assert_string_equal(r.primary, "a");
	/* a secondary report of b changes nothing; a release by a frees it (W2) */
	m = vmsg(WIT_F_RELEASE, 0x100);
	assert_int_equal(wit_rec_report(&r, "b", &m, &changed), WIT_R_OK);
	assert_false(changed);
	assert_int_equal(wit_rec_report(&r, "a", &m, &changed), WIT_R_OK);
	assert_true(changed);
	assert_string_equal(r.primary, "");
	assert_true(r.synced);
	assert_int_equal(r.epoch, 2);
	/* W1: a free record that named a primary takes only a node holding
	 * the data released: b, at an older generation, is deposed */
	m = vmsg(WIT_F_PRIMARY, 0x99);
	assert_int_equal(wit_rec_report(&r, "b", &m, &changed), WIT_R_DEPOSED);
	assert_false(changed);
	/* a secondary report without RELEASE (a step-down) keeps the record */
	m = vmsg(WIT_F_PRIMARY, 0x200);
	m.history[0] = 0x100;
	assert_int_equal(wit_rec_report(&r, "a", &m, &changed), WIT_R_OK);
	m = vmsg(0, 0x200);
	assert_int_equal(wit_rec_report(&r, "a", &m, &changed), WIT_R_OK);
	assert_false(changed);
	assert_string_equal(r.primary, "a");
}

static void test_claim_rules(void **st)
{
	struct wit_rec r = { .volume = "vol0" };
	struct wit_vol_msg rep = vmsg(WIT_F_PRIMARY | WIT_F_SYNCED, 0x100), c = vmsg(0, 0x100);
	uint32_t reason;
	bool changed;
	(void)st;

	/* no record yet: never by itself; by hand (ADMIN), the operator's choice */
	assert_int_equal(wit_rec_claim(&r, "b", &c, false, false, &reason), WIT_DENY);
	assert_int_equal(reason, WIT_NO_RECORD);
	c.flags = WIT_F_ADMIN;
	assert_int_equal(wit_rec_claim(&r, "b", &c, false, false, &reason), WIT_GRANT);
	c.flags = 0;
	wit_rec_report(&r, "a", &rep, &changed);
	/* W3.2: while a is alive the claim waits; so does it in the grace */
	assert_int_equal(wit_rec_claim(&r, "b", &c, true, false, &reason), WIT_WAIT);
	assert_int_equal(wit_rec_claim(&r, "b", &c, false, true, &reason), WIT_WAIT);
	assert_int_equal(wit_rec_claim(&r, "b", &c, false, false, &reason), WIT_GRANT);
	/* the generation vouched for may be in the claimant's history */
	c.gen = 0x300;
	c.history[2] = 0x100;
	assert_int_equal(wit_rec_claim(&r, "b", &c, false, false, &reason), WIT_GRANT);
	/* W3.1: older data is refused, even when a is gone */
	c = vmsg(0, 0x99);
	assert_int_equal(wit_rec_claim(&r, "b", &c, false, false, &reason), WIT_DENY);
	assert_int_equal(reason, WIT_OLDER_DATA);
	/* a wrote alone: refused whatever b holds ... */
	rep = vmsg(WIT_F_PRIMARY, 0x100);
	wit_rec_report(&r, "a", &rep, &changed);
	c = vmsg(0, 0x100);
	assert_int_equal(wit_rec_claim(&r, "b", &c, false, false, &reason), WIT_DENY);
	assert_int_equal(reason, WIT_NOT_SYNCED);
	/* ... unless forced, and never while a is alive */
	c.flags = WIT_F_FORCE;
	assert_int_equal(wit_rec_claim(&r, "b", &c, true, false, &reason), WIT_WAIT);
	assert_int_equal(wit_rec_claim(&r, "b", &c, false, false, &reason), WIT_GRANT);
	/* by hand but without --force, the same data check: nothing is
	 * skipped but the "no record" refusal */
	c = vmsg(WIT_F_ADMIN, 0x100);
	assert_int_equal(wit_rec_claim(&r, "b", &c, false, false, &reason), WIT_DENY);
	assert_int_equal(reason, WIT_NOT_SYNCED);
	/* the recorded primary's own claim is granted at once, if it holds
	 * the data it was recorded with ... */
	c = vmsg(0, 0x100);
	assert_int_equal(wit_rec_claim(&r, "a", &c, false, true, &reason), WIT_GRANT);
	/* ... not when its disk was wiped (a new disk, the same name) */
	c = vmsg(0, 0x1);
	assert_int_equal(wit_rec_claim(&r, "a", &c, false, true, &reason), WIT_DENY);
	assert_int_equal(reason, WIT_OLDER_DATA);
	/* nor may it report itself primary then (W1: data, not names) */
	rep = vmsg(WIT_F_PRIMARY, 0x1);
	assert_int_equal(wit_rec_report(&r, "a", &rep, &changed), WIT_R_DEPOSED);
	assert_false(changed);
	assert_string_equal(r.primary, "a");
	assert_int_equal(r.gen, 0x100);
	/* W5: a's release while it lacks the recorded data (wiped: 0x1)
	 * frees the record but keeps its gen: what a leaves is not it. A
	 * release from b, which the record does not name, changes nothing. */
	{
		struct wit_rec keep = r;
		rep = vmsg(WIT_F_RELEASE, 0x1);
		wit_rec_report(&keep, "b", &rep, &changed);
		assert_false(changed);
		assert_string_equal(keep.primary, "a");
		wit_rec_report(&keep, "a", &rep, &changed);
		assert_true(changed);
		assert_string_equal(keep.primary, "");
		assert_int_equal(keep.gen, 0x100);
		/* then a node holding 0x100 is granted, by hand; another only
		 * with --force */
		c = vmsg(WIT_F_ADMIN, 0x100);
		assert_int_equal(wit_rec_claim(&keep, "b", &c, false, false, &reason), WIT_GRANT);
		c = vmsg(WIT_F_ADMIN, 0x1);
		assert_int_equal(wit_rec_claim(&keep, "b", &c, false, false, &reason), WIT_DENY);
		assert_int_equal(reason, WIT_OLDER_DATA);
		c.flags |= WIT_F_FORCE;
		assert_int_equal(wit_rec_claim(&keep, "b", &c, false, false, &reason), WIT_GRANT);
	}
	/* W2: a's release (it wrote alone, at 0x400, branched from 0x100)
	 * leaves gen 0x400; only a node holding it may take the volume, by
	 * hand */
	rep = vmsg(WIT_F_RELEASE, 0x400);
	rep.history[WIT_HISTORY - 1] = 0x100;
	wit_rec_report(&r, "a", &rep, &changed);
	assert_true(changed);
	assert_int_equal(r.gen, 0x400);
	c = vmsg(WIT_F_ADMIN, 0x100);
	assert_int_equal(wit_rec_claim(&r, "b", &c, false, false, &reason), WIT_DENY);
	assert_int_equal(reason, WIT_OLDER_DATA);
	c = vmsg(WIT_F_ADMIN, 0x400);
	assert_int_equal(wit_rec_claim(&r, "a", &c, false, false, &reason), WIT_GRANT);
	c.history[1] = 0x400;
	c.gen = 0x500;
	assert_int_equal(wit_rec_claim(&r, "b", &c, false, false, &reason), WIT_GRANT);
}

static void test_grant(void **st)
{
	struct wit_rec r = { .volume = "vol0" };
	struct wit_vol_msg rep = vmsg(WIT_F_PRIMARY | WIT_F_SYNCED, 0x100), c = vmsg(0, 0x100);
	bool changed;
	uint32_t reason;
	(void)st;

	wit_rec_report(&r, "a", &rep, &changed);
	wit_rec_grant(&r, "b", &c);
	assert_string_equal(r.primary, "b");
	assert_false(r.synced);       /* WR1 */
	assert_int_equal(r.epoch, 2); /* WR2 */
	/* the old primary returning is deposed; its claim now waits for b */
	assert_int_equal(wit_rec_report(&r, "a", &rep, &changed), WIT_R_DEPOSED);
	c = vmsg(0, 0x100);
	assert_int_equal(wit_rec_claim(&r, "a", &c, true, false, &reason), WIT_DENY);
	assert_int_equal(reason, WIT_NOT_SYNCED);
}

static void test_store(void **st)
{
	char *dir = unit_mkdtemp("wit");
	char path[512];
	struct wit_rec recs[3], back[3];
	unsigned n;
	int fd;
	uint8_t b;
	(void)st;

	snprintf(path, sizeof(path), "%s/witness-lab.state", dir);
	assert_int_equal(wit_store_load(path, "lab", back, 3, &n), -ENOENT);
	memset(recs, 0, sizeof(recs));
	for (int i = 0; i < 3; i++) {
		snprintf(recs[i].volume, sizeof(recs[i].volume), "v%d", i);
		recs[i].gen = 0x1000 + (uint64_t)i;
		recs[i].epoch = (uint64_t)i;
		recs[i].synced = i & 1;
	}
	snprintf(recs[1].primary, sizeof(recs[1].primary), "b");
	assert_int_equal(wit_store_save(path, "lab", recs, 3), 0);
	assert_int_equal(wit_store_load(path, "lab", back, 3, &n), 0);
	assert_int_equal(n, 3);
	assert_memory_equal(back, recs, sizeof(recs));
	/* another cluster's file is refused */
	assert_int_equal(wit_store_load(path, "other", back, 3, &n), -EBADMSG);
	/* a flipped byte is refused (CRC) */
	fd = open(path, O_RDWR);
	assert_true(fd >= 0);
	assert_int_equal(pread(fd, &b, 1, 100), 1);
	b ^= 0x40;
	assert_int_equal(pwrite(fd, &b, 1, 100), 1);
	assert_int_equal(wit_store_load(path, "lab", back, 3, &n), -EBADMSG);
	/* a torn (short) file too */
	assert_int_equal(ftruncate(fd, 90), 0);
	close(fd);
	assert_int_equal(wit_store_load(path, "lab", back, 3, &n), -EBADMSG);
	/* a new save replaces it whole */
	assert_int_equal(wit_store_save(path, "lab", recs, 2), 0);
	assert_int_equal(wit_store_load(path, "lab", back, 3, &n), 0);
	assert_int_equal(n, 2);
	unit_rmtree(dir);
	free(dir);
}

static void roundtrip(const uint8_t *buf, size_t len, struct wit_msg *m)
{
	assert_true(len >= sizeof(struct wit_hdr));
	assert_int_equal(wit_decode_hdr(buf, m), 0);
	assert_int_equal(m->len, len - sizeof(struct wit_hdr));
	assert_int_equal(wit_decode_body(buf + sizeof(struct wit_hdr), m), 0);
}

/* A REPORT or CLAIM with these flags: the header decodes, the body is refused. */
static void vol_refused(uint16_t type, struct wit_vol_msg v, uint32_t flags)
{
	uint8_t buf[WIT_ENC_MAX];
	struct wit_msg m;

	v.flags = flags;
	wit_enc_vol(buf, type, &v);
	assert_int_equal(wit_decode_hdr(buf, &m), 0);
	assert_int_equal(wit_decode_body(buf + sizeof(struct wit_hdr), &m), -EBADMSG);
}

static void test_codec(void **st)
{
	uint8_t buf[WIT_ENC_MAX], nonce[WIT_NONCE_LEN], mac1[WIT_MAC_LEN], mac2[WIT_MAC_LEN];
	struct wit_msg m;
	struct wit_vol_msg v = vmsg(WIT_F_PRIMARY | WIT_F_SYNCED, 0xabc);
	struct wit_verdict d;
	size_t n;
	(void)st;

	memset(nonce, 0x5a, sizeof(nonce));
	n = wit_enc_hello(buf, "lab", "a", nonce, 0, 3000);
	roundtrip(buf, n, &m);
	assert_string_equal(m.u.hello.cluster, "lab");
	assert_string_equal(m.u.hello.name, "a");
	assert_int_equal(m.u.hello.timeout_ms, 3000);
	/* the field that was reserved, little-endian at offset 176 */
	assert_int_equal(buf[sizeof(struct wit_hdr) + offsetof(struct wit_hello, timeout_ms)],
			 3000 & 0xff);
	assert_int_equal(offsetof(struct wit_hello, timeout_ms), 176);
	/* an admin client's (and an older node's) 0 still decodes */
	n = wit_enc_hello(buf, "lab", "tandemctl", nonce, WIT_HELLO_F_ADMIN, 0);
	roundtrip(buf, n, &m);
	assert_int_equal(m.u.hello.timeout_ms, 0);
	v.history[3] = 0x77;
	n = wit_enc_vol(buf, WIT_REPORT, &v);
	roundtrip(buf, n, &m);
	assert_int_equal(m.u.vol.gen, 0xabc);
	assert_int_equal(m.u.vol.history[3], 0x77);
	assert_int_equal(m.u.vol.seq, 7);
	/* PRIMARY in a CLAIM, FORCE in a REPORT, RELEASE with PRIMARY: refused */
	vol_refused(WIT_CLAIM, v, v.flags);
	vol_refused(WIT_REPORT, v, WIT_F_FORCE);
	vol_refused(WIT_REPORT, v, WIT_F_RELEASE | WIT_F_PRIMARY);
	/* ADMIN only in a CLAIM; FORCE only with it */
	vol_refused(WIT_REPORT, v, WIT_F_ADMIN);
	vol_refused(WIT_CLAIM, v, WIT_F_FORCE);
	v.flags = WIT_F_ADMIN | WIT_F_FORCE;
	n = wit_enc_vol(buf, WIT_CLAIM, &v);
	roundtrip(buf, n, &m);
	assert_int_equal(m.u.vol.flags, WIT_F_ADMIN | WIT_F_FORCE);
	/* PEER_GONE only in a CLAIM, with or without ADMIN */
	vol_refused(WIT_REPORT, v, WIT_F_PEER_GONE);
	vol_refused(WIT_REPORT, v, WIT_F_PEER_GONE | WIT_F_PRIMARY);
	v.flags = WIT_F_PEER_GONE;
	n = wit_enc_vol(buf, WIT_CLAIM, &v);
	roundtrip(buf, n, &m);
	assert_int_equal(m.u.vol.flags, WIT_F_PEER_GONE);
	v.flags = WIT_F_ADMIN | WIT_F_PEER_GONE;
	n = wit_enc_vol(buf, WIT_CLAIM, &v);
	roundtrip(buf, n, &m);
	assert_int_equal(m.u.vol.flags, WIT_F_ADMIN | WIT_F_PEER_GONE);
	/* a flag nobody knows yet */
	vol_refused(WIT_CLAIM, v, 64u);
	memset(&d, 0, sizeof(d));
	snprintf(d.volume, sizeof(d.volume), "vol0");
	snprintf(d.primary, sizeof(d.primary), "b");
	d.result = WIT_R_DENIED;
	d.reason = WIT_NOT_SYNCED;
	d.epoch = 9;
	n = wit_enc_verdict(buf, WIT_CLAIM_REPLY, &d);
	roundtrip(buf, n, &m);
	assert_string_equal(m.u.verd.primary, "b");
	assert_int_equal(m.u.verd.epoch, 9);
	/* DENIED is no answer to a REPORT */
	n = wit_enc_verdict(buf, WIT_REPORT_ACK, &d);
	assert_int_equal(wit_decode_hdr(buf, &m), 0);
	assert_int_equal(wit_decode_body(buf + sizeof(struct wit_hdr), &m), -EBADMSG);
	/* a name with garbage after its NUL */
	v = vmsg(0, 1);
	n = wit_enc_vol(buf, WIT_CLAIM, &v);
	buf[sizeof(struct wit_hdr) + 10] = 'x';
	assert_int_equal(wit_decode_hdr(buf, &m), 0);
	assert_int_equal(wit_decode_body(buf + sizeof(struct wit_hdr), &m), -EBADMSG);
	/* header: bad magic, unknown type, wrong length */
	n = wit_enc_ping(buf, WIT_PING, 1);
	buf[0] ^= 1;
	assert_int_equal(wit_decode_hdr(buf, &m), -EBADMSG);
	buf[0] ^= 1;
	buf[4] = 99;
	assert_int_equal(wit_decode_hdr(buf, &m), -EBADMSG);
	buf[4] = WIT_PING;
	buf[8] = 9;
	assert_int_equal(wit_decode_hdr(buf, &m), -EBADMSG);
	(void)n;
	/* the proof depends on the direction, both nonces, the names */
	wit_mac("s", 'N', nonce, nonce, "lab", "a", mac1);
	wit_mac("s", 'W', nonce, nonce, "lab", "a", mac2);
	assert_memory_not_equal(mac1, mac2, WIT_MAC_LEN);
	wit_mac("s", 'N', nonce, nonce, "lab", "b", mac2);
	assert_memory_not_equal(mac1, mac2, WIT_MAC_LEN);
	wit_mac("t", 'N', nonce, nonce, "lab", "a", mac2);
	assert_memory_not_equal(mac1, mac2, WIT_MAC_LEN);
}

/* W0: a node's HELLO carries its witness-timeout; the witness refuses one
 * that is not its cluster's, and a node that does not say it (0). */
static void test_hello_timeout(void **st)
{
	char why[WIT_MAX_ERROR];
	(void)st;

	assert_int_equal(wit_hello_timeout_check("lab", "a", 2000, 2000, why, sizeof(why)), 0);
	assert_int_equal(wit_hello_timeout_check("lab", "a", 3000, 2000, why, sizeof(why)),
			 -EINVAL);
	assert_string_equal(why, "witness-timeout differs: node a says 3.0 s, this witness has "
				 "2.0 s for cluster lab");
	assert_int_equal(wit_hello_timeout_check("lab", "b", 250, 300000, why, sizeof(why)),
			 -EINVAL);
	assert_string_equal(why, "witness-timeout differs: node b says 0.250 s, this witness has "
				 "300.0 s for cluster lab");
	/* 0 from a node: an older node, refused with a reason of its own */
	assert_int_equal(wit_hello_timeout_check("lab", "a", 0, 2000, why, sizeof(why)), -EINVAL);
	assert_non_null(strstr(why, "node a does not say its witness-timeout"));
	assert_non_null(strstr(why, "2.0 s for cluster lab"));
	/* the longest names still give one bounded line */
	{
		char name[WIT_NAME_LEN];
		memset(name, 'x', sizeof(name) - 1);
		name[sizeof(name) - 1] = 0;
		assert_int_equal(
			wit_hello_timeout_check(name, name, 1, UINT64_MAX, why, sizeof(why)),
			-EINVAL);
		assert_true(strlen(why) < sizeof(why));
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_report_takes_free_record),
		cmocka_unit_test(test_claim_rules),
		cmocka_unit_test(test_grant),
		cmocka_unit_test(test_store),
		cmocka_unit_test(test_codec),
		cmocka_unit_test(test_hello_timeout),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* Reservations of one logical unit (see pr.h for the rules, the transitions
 * and the invariants P1-P5). CDB fields, parameter lists, data-in and the
 * stored image are big-endian (be.h). Single writers, so that P1-P3 are kept
 * in one place each: the reservation (holder, type) by res_set(), the
 * registrations by reg_add() / reg_remove(), the SPC-2 reservation by
 * legacy_set(). Sense bytes come from the scsi.h builders only. */
#include "pr.h"

#include <assert.h>
#include <errno.h>
#include <string.h>

#include "../common/be.h"

/* ---- nexus and types ---- */

/* A name is the bytes before the first NUL, at most PR_NAME_MAX - 1 of them,
 * so that an unterminated name from a caller compares equal to its copy. */
static size_t name_len(const char *name)
{
	return strnlen(name, PR_NAME_MAX - 1);
}

static bool nexus_eq(const struct pr_nexus *a, const struct pr_nexus *b)
{
	size_t n = name_len(a->initiator);

	return a->tport == b->tport && n == name_len(b->initiator) &&
	       memcmp(a->initiator, b->initiator, n) == 0;
}

/* Copies the name NUL-terminated and zero-filled. */
static void nexus_copy(struct pr_nexus *dst, const struct pr_nexus *src)
{
	size_t n = name_len(src->initiator);
	struct pr_nexus t;

	memset(&t, 0, sizeof(t));
	memcpy(t.initiator, src->initiator, n);
	t.tport = src->tport;
	*dst = t; /* src may be dst */
}

static bool type_valid(unsigned t)
{
	return t == PR_TYPE_WE || t == PR_TYPE_EA || t == PR_TYPE_WERO || t == PR_TYPE_EARO ||
	       t == PR_TYPE_WEAR || t == PR_TYPE_EAAR;
}

static bool type_all_reg(unsigned t)
{
	return t == PR_TYPE_WEAR || t == PR_TYPE_EAAR;
}

/* Registrants only or all registrants: other registrants may write. */
static bool type_shared(unsigned t)
{
	return t == PR_TYPE_WERO || t == PR_TYPE_EARO || type_all_reg(t);
}

/* Reads (data-in from the medium) stay allowed for non-holders. */
static bool type_write_excl(unsigned t)
{
	return t == PR_TYPE_WE || t == PR_TYPE_WERO || t == PR_TYPE_WEAR;
}

/* ---- the single writers ---- */

static void res_set(struct pr_state *s, int holder, uint8_t type)
{
	assert((holder == -1 && type == 0) ||
	       (holder >= 0 && (uint32_t)holder < s->nreg && type_valid(type)));
	s->holder = holder;
	s->type = type;
}

static int reg_find(const struct pr_state *s, const struct pr_nexus *who)
{
	for (uint32_t i = 0; i < s->nreg; i++)
		if (nexus_eq(&s->reg[i].n, who))
			return (int)i;
	return -1;
}

/* The caller checked that who is not registered and that there is room. */
static void reg_add(struct pr_state *s, const struct pr_nexus *who, uint64_t key)
{
	assert(s->nreg < PR_MAX_REG && key != 0 && reg_find(s, who) < 0);
	s->reg[s->nreg].key = key;
	nexus_copy(&s->reg[s->nreg].n, who);
	s->nreg++;
}

/* Removes reg[i], keeping the order of the others. The reservation follows
 * SPC-4 5.13.11.2.3: a holder that goes releases it, except that an
 * all-registrants reservation passes to a remaining registrant. */
static void reg_remove(struct pr_state *s, uint32_t i)
{
	int h = s->holder;

	assert(i < s->nreg);
	memmove(&s->reg[i], &s->reg[i + 1], (s->nreg - i - 1) * sizeof(s->reg[0]));
	s->nreg--;
	memset(&s->reg[s->nreg], 0, sizeof(s->reg[0]));
	if (h < 0)
		return;
	if ((uint32_t)h == i) {
		if (type_all_reg(s->type) && s->nreg > 0)
			res_set(s, 0, s->type);
		else
			res_set(s, -1, 0);
	} else if ((uint32_t)h > i) {
		res_set(s, h - 1, s->type);
	}
}

static void legacy_set(struct pr_state *s, const struct pr_nexus *who)
{
	assert(!who || s->nreg == 0); /* P3 */
	s->legacy = who != NULL;
	if (who)
		nexus_copy(&s->legacy_nexus, who);
	else
		memset(&s->legacy_nexus, 0, sizeof(s->legacy_nexus));
}

/* reg[i] holds the persistent reservation (every registrant does for the
 * all-registrants types). */
static bool is_holder(const struct pr_state *s, int i)
{
	return i >= 0 && s->holder >= 0 && (type_all_reg(s->type) || s->holder == i);
}

void pr_init(struct pr_state *s)
{
	memset(s, 0, sizeof(*s));
	s->holder = -1;
}

/* ---- conflicts ---- */

enum op_class {
	OC_OTHER = 0, /* writes and everything else, unknown opcodes included */
	OC_ALWAYS,    /* allowed whatever the persistent reservation */
	OC_READ,      /* allowed under the write-exclusive types */
	OC_BY_FIELD,  /* decided by a CDB field: see classify() */
};

static const uint8_t op_class[256] = {
	[0x00] = OC_ALWAYS,   /* TEST UNIT READY */
	[0x03] = OC_ALWAYS,   /* REQUEST SENSE */
	[0x08] = OC_READ,     /* READ(6) */
	[0x12] = OC_ALWAYS,   /* INQUIRY */
	[0x1a] = OC_READ,     /* MODE SENSE(6) */
	[0x1b] = OC_BY_FIELD, /* START STOP UNIT */
	[0x1c] = OC_READ,     /* RECEIVE DIAGNOSTIC RESULTS */
	[0x1e] = OC_BY_FIELD, /* PREVENT ALLOW MEDIUM REMOVAL */
	[0x25] = OC_ALWAYS,   /* READ CAPACITY(10) */
	[0x28] = OC_READ,     /* READ(10) */
	[0x2f] = OC_READ,     /* VERIFY(10) */
	[0x34] = OC_READ,     /* PRE-FETCH(10) */
	[0x37] = OC_READ,     /* READ DEFECT DATA(10) */
	[0x3c] = OC_READ,     /* READ BUFFER */
	[0x3e] = OC_READ,     /* READ LONG(10) */
	[0x4d] = OC_ALWAYS,   /* LOG SENSE */
	[0x5a] = OC_READ,     /* MODE SENSE(10) */
	[PR_OP_IN] = OC_ALWAYS,
	[PR_OP_OUT] = OC_BY_FIELD,
	[0x7f] = OC_BY_FIELD, /* variable length: READ(32), VERIFY(32), WRITE(32) ... */
	[0x84] = OC_READ,     /* RECEIVE COPY RESULTS */
	[0x86] = OC_ALWAYS,   /* ACCESS CONTROL IN */
	[0x87] = OC_ALWAYS,   /* ACCESS CONTROL OUT */
	[0x88] = OC_READ,     /* READ(16) */
	[0x8c] = OC_READ,     /* READ ATTRIBUTE */
	[0x8f] = OC_READ,     /* VERIFY(16) */
	[0x90] = OC_READ,     /* PRE-FETCH(16) */
	[0x9e] = OC_BY_FIELD, /* SERVICE ACTION IN(16) */
	[0xa0] = OC_ALWAYS,   /* REPORT LUNS */
	[0xa2] = OC_READ,     /* SECURITY PROTOCOL IN */
	[0xa3] = OC_BY_FIELD, /* MAINTENANCE IN */
	[0xa8] = OC_READ,     /* READ(12) */
	[0xab] = OC_BY_FIELD, /* SERVICE ACTION IN(12) */
	[0xaf] = OC_READ,     /* VERIFY(12) */
	[0xb7] = OC_READ,     /* READ DEFECT DATA(12) */
};

static enum op_class classify(const uint8_t *cdb)
{
	uint8_t sa = cdb[1] & 0x1f;

	switch (cdb[0]) {
	case 0x1b: /* START STOP UNIT: START 1, POWER CONDITION 0 only */
		return (cdb[4] & 0xf1) == 0x01 ? OC_ALWAYS : OC_OTHER;
	case 0x1e: /* PREVENT ALLOW MEDIUM REMOVAL: PREVENT 0 only */
		return (cdb[4] & 0x03) == 0 ? OC_ALWAYS : OC_OTHER;
	case 0x7f: /* READ(32) 0x0009, VERIFY(32) 0x000a */
		return get16(cdb + 8) == 0x0009 || get16(cdb + 8) == 0x000a ? OC_READ : OC_OTHER;
	case 0x9e: /* READ CAPACITY(16), REPORT REFERRALS; the rest read */
		return sa == 0x10 || sa == 0x13 ? OC_ALWAYS : OC_READ;
	case 0xa3: /* the reports; MANAGEMENT PROTOCOL IN reads */
		return sa == 0x10 ? OC_READ : OC_ALWAYS;
	case 0xab: /* READ MEDIA SERIAL NUMBER */
		return sa == 0x01 ? OC_ALWAYS : OC_READ;
	default:
		return (enum op_class)op_class[cdb[0]];
	}
}

static bool is_legacy_op(uint8_t op)
{
	return op == PR_OP_RESERVE_6 || op == PR_OP_RELEASE_6 || op == PR_OP_RESERVE_10 ||
	       op == PR_OP_RELEASE_10;
}

/* What another nexus may still send while an SPC-2 RESERVE is held. */
static bool legacy_allowed(const uint8_t *cdb)
{
	switch (cdb[0]) {
	case 0x12: /* INQUIRY */
	case 0xa0: /* REPORT LUNS */
	case 0x03: /* REQUEST SENSE */
	case 0x4d: /* LOG SENSE */
	case PR_OP_RELEASE_6:
	case PR_OP_RELEASE_10: /* GOOD, the reservation stays */
		return true;
	case 0x1e: /* PREVENT ALLOW MEDIUM REMOVAL with PREVENT 0 */
		return (cdb[4] & 0x03) == 0;
	case 0xa3: /* REPORT TARGET PORT GROUPS (multipath path checkers) */
		return (cdb[1] & 0x1f) == 0x0a;
	default:
		return false;
	}
}

/* SPC-4 table "PERSISTENT RESERVE OUT service actions that are allowed in the
 * presence of various reservations", for a nexus that is not a holder. */
static bool prout_conflict(const uint8_t *cdb, bool registered)
{
	switch (cdb[1] & 0x1f) {
	case PR_OUT_REGISTER:
	case PR_OUT_REGISTER_AND_IGNORE:
		return false;
	case PR_OUT_RELEASE: /* GOOD no-op for a registered non-holder */
	case PR_OUT_CLEAR:
	case PR_OUT_PREEMPT:
	case PR_OUT_PREEMPT_AND_ABORT:
		return !registered;
	case PR_OUT_RESERVE:
	case PR_OUT_REGISTER_AND_MOVE:
		return true;
	default: /* pr_out refuses it: INVALID FIELD IN CDB */
		return false;
	}
}

bool pr_conflict(const struct pr_state *s, const struct pr_nexus *who, const uint8_t *cdb)
{
	uint8_t op = cdb[0];
	bool registered;
	int me;

	if (s->legacy) {
		/* SPC-2 5.5.1: PRIN and PROUT conflict whoever sends them. */
		if (op == PR_OP_IN || op == PR_OP_OUT)
			return true;
		return !nexus_eq(&s->legacy_nexus, who) && !legacy_allowed(cdb);
	}
	if (is_legacy_op(op))
		return s->nreg > 0; /* CRH=0 (SPC-4 5.13.3) */
	if (s->holder < 0)
		return false;
	me = reg_find(s, who);
	if (is_holder(s, me))
		return false;
	registered = me >= 0;
	if (op == PR_OP_OUT)
		return prout_conflict(cdb, registered);
	switch (classify(cdb)) {
	case OC_ALWAYS:
		return false;
	case OC_READ:
		if (type_write_excl(s->type))
			return false;
		return s->type == PR_TYPE_EA || !registered;
	default: /* OC_OTHER */
		if (s->type == PR_TYPE_WE || s->type == PR_TYPE_EA)
			return true;
		return !registered;
	}
}

/* ---- PERSISTENT RESERVE IN ---- */

static uint32_t read_keys(const struct pr_state *s, uint8_t *d)
{
	put32(d, s->generation);
	put32(d + 4, 8 * s->nreg);
	for (uint32_t i = 0; i < s->nreg; i++)
		put64(d + 8 + 8 * i, s->reg[i].key);
	return 8 + 8 * s->nreg;
}

static uint32_t read_reservation(const struct pr_state *s, uint8_t *d)
{
	put32(d, s->generation);
	if (s->holder < 0) {
		put32(d + 4, 0);
		return 8;
	}
	put32(d + 4, 16);
	memset(d + 8, 0, 16);
	/* SPC-4 6.15.3: an all-registrants reservation has key 0 */
	put64(d + 8, type_all_reg(s->type) ? 0 : s->reg[s->holder].key);
	d[21] = (uint8_t)(PR_SCOPE_LU << 4 | s->type);
	return 24;
}

static uint32_t report_capabilities(const struct pr_state *s, uint8_t *d)
{
	memset(d, 0, 8);
	put16(d, 8);
	d[2] = 0x01; /* CRH 0, SIP_C 0, ATP_C 0, PTPL_C 1 */
	d[3] = (uint8_t)(0x80 | 3 << 4 | (s->aptpl ? 0x01 : 0)); /* TMV, ALLOW COMMANDS 011b, PTPL_A */
	d[4] = 0x80 | 0x40 | 0x20 | 0x08 | 0x02; /* WR_EX_AR EX_AC_RO WR_EX_RO EX_AC WR_EX */
	d[5] = 0x01;                             /* EX_AC_AR */
	return 8;
}

/* iSCSI TransportID (SPC-4 7.6.4.6): format 01b when the name carries
 * ",i,0x<ISID>", else 00b; NUL-terminated, padded to a multiple of 4, at
 * least 20 bytes after the header. t has room for 4 + PR_NAME_MAX + 3. */
static uint32_t transport_id(const struct pr_nexus *n, uint8_t *t)
{
	size_t len = name_len(n->initiator);
	uint32_t pad = (uint32_t)(len + 1 + 3) & ~3u;

	if (pad < 20)
		pad = 20;
	memset(t, 0, 4 + pad);
	t[0] = (memmem(n->initiator, len, ",i,0x", 5) ? 0x40 : 0x00) | 0x05;
	put16(t + 2, (uint16_t)pad);
	memcpy(t + 4, n->initiator, len);
	return 4 + pad;
}

/* Writes what fits in d[0..cap) and returns the length of all of it. */
static uint32_t read_full_status(const struct pr_state *s, uint8_t *d, uint32_t cap)
{
	uint8_t desc[24 + 4 + PR_NAME_MAX + 3];
	uint32_t pos = 8;

	for (uint32_t i = 0; i < s->nreg; i++) {
		bool h = is_holder(s, (int)i);
		uint32_t tid;

		memset(desc, 0, 24);
		put64(desc, s->reg[i].key);
		desc[12] = h ? 0x01 : 0x00; /* ALL_TG_PT 0, R_HOLDER */
		desc[13] = h ? (uint8_t)(PR_SCOPE_LU << 4 | s->type) : 0;
		put16(desc + 18, s->reg[i].n.tport);
		tid = transport_id(&s->reg[i].n, desc + 24);
		put32(desc + 20, tid);
		if (pos < cap)
			memcpy(d + pos, desc, 24 + tid < cap - pos ? 24 + tid : cap - pos);
		pos += 24 + tid;
	}
	put32(d, s->generation);
	put32(d + 4, pos - 8);
	return pos;
}

void pr_in(const struct pr_state *s, const uint8_t *cdb, struct scsi_req *out)
{
	uint32_t alloc = get16(cdb + 7), n;

	if (cdb[9] & 0x05) { /* NACA, LINK */
		scsi_bad_cdb(out, 9);
		return;
	}
	switch (cdb[1] & 0x1f) {
	case PR_IN_READ_KEYS:
		n = read_keys(s, out->data);
		break;
	case PR_IN_READ_RESERVATION:
		n = read_reservation(s, out->data);
		break;
	case PR_IN_REPORT_CAPABILITIES:
		n = report_capabilities(s, out->data);
		break;
	case PR_IN_READ_FULL_STATUS:
		n = read_full_status(s, out->data, sizeof(out->data));
		break;
	default:
		scsi_bad_cdb(out, 1);
		return;
	}
	scsi_data_in(out, n, alloc); /* cuts at sizeof(out->data) as well */
}

/* ---- PERSISTENT RESERVE OUT ---- */

static int conflict(struct scsi_req *out)
{
	scsi_done(out, SCSI_RESERVATION_CONFLICT);
	return 0;
}

static int good(struct scsi_req *out, int changed)
{
	scsi_done(out, SCSI_GOOD);
	return changed;
}

/* The parameter list fields of one PROUT. */
struct prout {
	uint8_t sa, type;
	uint64_t key;  /* RESERVATION KEY */
	uint64_t sark; /* SERVICE ACTION RESERVATION KEY */
	bool aptpl;
};

/* REGISTER and REGISTER AND IGNORE EXISTING KEY (SPC-4 5.13.7). */
static int do_register(struct pr_state *s, int me, const struct pr_nexus *who,
		       const struct prout *p, struct scsi_req *out)
{
	bool check_key = p->sa == PR_OUT_REGISTER;

	if (me < 0) {
		if (check_key && p->key != 0)
			return conflict(out);
		if (p->sark == 0)
			return good(out, 0); /* nothing to unregister */
		if (s->nreg == PR_MAX_REG) {
			scsi_check(out, SCSI_KEY_ILLEGAL_REQUEST, PR_ASC_INSUFFICIENT_REG);
			return 0;
		}
		reg_add(s, who, p->sark);
	} else {
		if (check_key && p->key != s->reg[me].key)
			return conflict(out);
		if (p->sark == 0)
			reg_remove(s, (uint32_t)me);
		else
			s->reg[me].key = p->sark;
	}
	s->aptpl = p->aptpl;
	s->generation++;
	return good(out, 1);
}

static int do_reserve(struct pr_state *s, int me, const struct prout *p, struct scsi_req *out)
{
	if (s->holder >= 0) {
		if (is_holder(s, me) && s->type == p->type)
			return good(out, 0);
		return conflict(out); /* another holder, or another type */
	}
	res_set(s, me, p->type);
	return good(out, 1);
}

static int do_release(struct pr_state *s, int me, const struct prout *p, struct scsi_req *out)
{
	if (!is_holder(s, me))
		return good(out, 0); /* no reservation, or not ours: nothing happens */
	if (s->type != p->type) {
		scsi_check(out, SCSI_KEY_ILLEGAL_REQUEST, PR_ASC_INVALID_RELEASE);
		return 0;
	}
	res_set(s, -1, 0);
	return good(out, 1);
}

static int do_clear(struct pr_state *s, struct scsi_req *out)
{
	while (s->nreg)
		reg_remove(s, s->nreg - 1);
	s->generation++;
	return good(out, 1);
}

/* Removes the registrations with key except who's; returns how many
 * registrations had key (who's included). */
static unsigned remove_key(struct pr_state *s, uint64_t key, const struct pr_nexus *who)
{
	unsigned matched = 0;

	for (uint32_t i = s->nreg; i-- > 0;) {
		if (s->reg[i].key != key)
			continue;
		matched++;
		if (!nexus_eq(&s->reg[i].n, who))
			reg_remove(s, i);
	}
	return matched;
}

/* PREEMPT and PREEMPT AND ABORT (SPC-4 5.13.11.2). The preempting nexus never
 * loses its own registration. */
static int do_preempt(struct pr_state *s, const struct pr_nexus *who, const struct prout *p,
		      struct scsi_req *out)
{
	bool all_reg = s->holder >= 0 && type_all_reg(s->type);

	if (all_reg && p->sark == 0) {
		/* every other registrant goes; we hold the new reservation */
		for (uint32_t i = s->nreg; i-- > 0;)
			if (!nexus_eq(&s->reg[i].n, who))
				reg_remove(s, i);
		res_set(s, reg_find(s, who), p->type);
	} else if (s->holder >= 0 && !all_reg && p->sark == s->reg[s->holder].key) {
		/* the holder's key: its registrations go, the reservation is ours */
		remove_key(s, p->sark, who);
		res_set(s, reg_find(s, who), p->type);
	} else {
		/* only registrations go; the reservation, if any, stays */
		if (p->sark == 0) {
			scsi_bad_param(out, 8);
			return 0;
		}
		if (remove_key(s, p->sark, who) == 0)
			return conflict(out);
	}
	s->generation++;
	return good(out, 1);
}

static int prout(struct pr_state *s, const struct pr_nexus *who, const uint8_t *cdb,
		 const uint8_t *param, uint32_t len, struct scsi_req *out)
{
	struct prout p = { .sa = cdb[1] & 0x1f, .type = cdb[2] & 0x0f };
	bool typed = p.sa == PR_OUT_RESERVE || p.sa == PR_OUT_RELEASE || p.sa == PR_OUT_PREEMPT ||
		     p.sa == PR_OUT_PREEMPT_AND_ABORT;
	bool reg = p.sa == PR_OUT_REGISTER || p.sa == PR_OUT_REGISTER_AND_IGNORE;
	int me;

	/* CDB and parameter list first, then the state (registration, key). */
	if (cdb[9] & 0x05) { /* NACA, LINK */
		scsi_bad_cdb(out, 9);
		return 0;
	}
	if (p.sa > PR_OUT_REGISTER_AND_IGNORE) { /* REGISTER AND MOVE, reserved */
		scsi_bad_cdb(out, 1);
		return 0;
	}
	if (len >= PR_PARAM_LEN && (param[20] & PR_SPEC_I_PT)) { /* SIP_C=0 */
		scsi_bad_param(out, 20);
		return 0;
	}
	if (get32(cdb + 5) != PR_PARAM_LEN || len < PR_PARAM_LEN) {
		scsi_check(out, SCSI_KEY_ILLEGAL_REQUEST, SCSI_ASC_PARAM_LIST_LENGTH);
		return 0;
	}
	if (typed && ((cdb[2] >> 4) != PR_SCOPE_LU || !type_valid(p.type))) {
		scsi_bad_cdb(out, 2);
		return 0;
	}
	if (reg && (param[20] & PR_ALL_TG_PT)) { /* ATP_C=0; ignored by the others */
		scsi_bad_param(out, 20);
		return 0;
	}
	if (s->legacy) /* SPC-2 5.5.1, whoever holds it (P3) */
		return conflict(out);
	p.key = get64(param);
	p.sark = get64(param + 8);
	p.aptpl = param[20] & PR_APTPL;
	me = reg_find(s, who);
	if (reg)
		return do_register(s, me, who, &p, out);
	if (me < 0 || p.key != s->reg[me].key)
		return conflict(out);
	switch (p.sa) {
	case PR_OUT_RESERVE:
		return do_reserve(s, me, &p, out);
	case PR_OUT_RELEASE:
		return do_release(s, me, &p, out);
	case PR_OUT_CLEAR:
		return do_clear(s, out);
	default: /* PREEMPT, PREEMPT AND ABORT */
		return do_preempt(s, who, &p, out);
	}
}

/* RESERVE(6/10) and RELEASE(6/10), SPC-2 7.21-7.24 without third parties or
 * extents, with CRH=0 (SPC-4 5.13.3): they conflict while any registration
 * exists. */
static int legacy_out(struct pr_state *s, const struct pr_nexus *who, const uint8_t *cdb,
		      struct scsi_req *out)
{
	bool ten = cdb[0] == PR_OP_RESERVE_10 || cdb[0] == PR_OP_RELEASE_10;
	bool reserve = cdb[0] == PR_OP_RESERVE_6 || cdb[0] == PR_OP_RESERVE_10;
	unsigned ctl = ten ? 9 : 5;

	if (cdb[ctl] & 0x05) { /* NACA, LINK */
		scsi_bad_cdb(out, ctl);
		return 0;
	}
	/* (10): 3RDPTY, LONGID; (6): the obsolete third-party and extent bits */
	if (cdb[1] & (ten ? 0x12 : 0x1f)) {
		scsi_bad_cdb(out, 1);
		return 0;
	}
	if (s->nreg > 0)
		return conflict(out);
	if (reserve) {
		if (s->legacy)
			return nexus_eq(&s->legacy_nexus, who) ? good(out, 0) : conflict(out);
		legacy_set(s, who);
		return good(out, 1);
	}
	if (s->legacy && nexus_eq(&s->legacy_nexus, who)) {
		legacy_set(s, NULL);
		return good(out, 1);
	}
	return good(out, 0); /* not ours, or none: GOOD, nothing released */
}

int pr_out(struct pr_state *s, const struct pr_nexus *who, const uint8_t *cdb,
	   const uint8_t *param, uint32_t len, struct scsi_req *out)
{
	if (cdb[0] == PR_OP_OUT)
		return prout(s, who, cdb, param, len, out);
	if (is_legacy_op(cdb[0]))
		return legacy_out(s, who, cdb, out);
	scsi_check(out, SCSI_KEY_ILLEGAL_REQUEST, SCSI_ASC_INVALID_OPCODE); /* a caller bug */
	return 0;
}

uint16_t pr_ua(const struct pr_state *before, const struct pr_state *after, const uint8_t *cdb,
	       const struct pr_nexus *who, const struct pr_nexus *n)
{
	uint8_t sa = cdb[1] & 0x1f;
	bool preempt = sa == PR_OUT_PREEMPT || sa == PR_OUT_PREEMPT_AND_ABORT;

	if (cdb[0] != PR_OP_OUT || nexus_eq(n, who) || reg_find(before, n) < 0)
		return 0;
	if (reg_find(after, n) < 0) /* who removed n's registration */
		return sa == PR_OUT_CLEAR ? PR_UA_RES_PREEMPTED : preempt ? PR_UA_REG_PREEMPTED : 0;
	if (before->holder < 0)
		return 0;
	if (after->holder < 0) /* released; WE and EA release silently */
		return type_shared(before->type) ? PR_UA_RES_RELEASED : 0;
	return preempt && after->type != before->type ? PR_UA_RES_RELEASED : 0;
}

/* ---- transport events ---- */

int pr_nexus_lost(struct pr_state *s, const struct pr_nexus *who)
{
	if (!s->legacy || !nexus_eq(&s->legacy_nexus, who))
		return 0;
	legacy_set(s, NULL);
	return 1;
}

int pr_reset(struct pr_state *s)
{
	if (!s->legacy)
		return 0;
	legacy_set(s, NULL);
	return 1;
}

int pr_power_on(struct pr_state *s)
{
	int changed = s->legacy || s->generation != 0 || (!s->aptpl && s->nreg > 0);

	if (s->legacy)
		legacy_set(s, NULL);
	if (!s->aptpl)
		while (s->nreg)
			reg_remove(s, s->nreg - 1);
	s->generation = 0;
	return changed;
}

/* ---- validity, equality ---- */

static bool name_ok(const struct pr_nexus *n)
{
	return memchr(n->initiator, 0, PR_NAME_MAX) != NULL;
}

bool pr_valid(const struct pr_state *s)
{
	if (s->nreg > PR_MAX_REG)
		return false;
	for (uint32_t i = 0; i < s->nreg; i++) {
		if (s->reg[i].key == 0 || !name_ok(&s->reg[i].n))
			return false;
		for (uint32_t j = 0; j < i; j++)
			if (nexus_eq(&s->reg[i].n, &s->reg[j].n))
				return false;
	}
	if (s->holder == -1) {
		if (s->type != 0)
			return false;
	} else if (s->holder < 0 || (uint32_t)s->holder >= s->nreg || !type_valid(s->type)) {
		return false;
	}
	if (s->legacy && (s->nreg > 0 || !name_ok(&s->legacy_nexus)))
		return false;
	return true;
}

bool pr_equal(const struct pr_state *a, const struct pr_state *b)
{
	if (a->generation != b->generation || a->nreg != b->nreg || a->holder != b->holder ||
	    a->type != b->type || a->aptpl != b->aptpl || a->legacy != b->legacy)
		return false;
	if (a->nreg > PR_MAX_REG)
		return false;
	for (uint32_t i = 0; i < a->nreg; i++)
		if (a->reg[i].key != b->reg[i].key || !nexus_eq(&a->reg[i].n, &b->reg[i].n))
			return false;
	return !a->legacy || nexus_eq(&a->legacy_nexus, &b->legacy_nexus);
}

/* ---- image ---- */

#define IMG_MAGIC 0x54505231u /* "TPR1" */
#define IMG_VERSION 1
#define IMG_HDR 24u
#define IMG_F_APTPL 0x0001
#define IMG_F_LEGACY 0x0002
#define IMG_NO_HOLDER 0xffff

_Static_assert(IMG_HDR + PR_MAX_REG * (8 + 3 + PR_NAME_MAX - 1) + 3 + PR_NAME_MAX - 1 <=
		       PR_IMAGE_MAX, "the largest image fits PR_IMAGE_MAX");

static size_t nexus_size(const struct pr_nexus *n)
{
	return 3 + name_len(n->initiator);
}

static uint8_t *put_nexus(uint8_t *p, const struct pr_nexus *n)
{
	size_t len = name_len(n->initiator);

	put16(p, n->tport);
	p[2] = (uint8_t)len;
	memcpy(p + 3, n->initiator, len);
	return p + 3 + len;
}

int pr_encode(const struct pr_state *s, uint8_t *buf, size_t max)
{
	size_t need = IMG_HDR;
	uint8_t *p;

	if (!pr_valid(s))
		return -EINVAL;
	for (uint32_t i = 0; i < s->nreg; i++)
		need += 8 + nexus_size(&s->reg[i].n);
	if (s->legacy)
		need += nexus_size(&s->legacy_nexus);
	if (need > max)
		return -ENOSPC;
	memset(buf, 0, IMG_HDR);
	put32(buf, IMG_MAGIC);
	put16(buf + 4, IMG_VERSION);
	put16(buf + 6, (uint16_t)((s->aptpl ? IMG_F_APTPL : 0) | (s->legacy ? IMG_F_LEGACY : 0)));
	put32(buf + 8, (uint32_t)need);
	put32(buf + 12, s->generation);
	put16(buf + 16, (uint16_t)s->nreg);
	put16(buf + 18, s->holder < 0 ? IMG_NO_HOLDER : (uint16_t)s->holder);
	buf[20] = s->type;
	p = buf + IMG_HDR;
	for (uint32_t i = 0; i < s->nreg; i++) {
		put64(p, s->reg[i].key);
		p = put_nexus(p + 8, &s->reg[i].n);
	}
	if (s->legacy)
		p = put_nexus(p, &s->legacy_nexus);
	assert((size_t)(p - buf) == need);
	return (int)need;
}

/* A bounded reader: every take() checks what is left. */
struct rd {
	const uint8_t *p;
	size_t left;
};

static const uint8_t *take(struct rd *r, size_t n)
{
	const uint8_t *q = r->p;

	if (n > r->left)
		return NULL;
	r->p += n;
	r->left -= n;
	return q;
}

static bool get_nexus(struct rd *r, struct pr_nexus *n)
{
	const uint8_t *h = take(r, 3), *name;

	if (!h || h[2] >= PR_NAME_MAX)
		return false;
	name = take(r, h[2]);
	if (!name || memchr(name, 0, h[2])) /* a NUL inside would not survive encode */
		return false;
	memset(n, 0, sizeof(*n));
	n->tport = get16(h);
	memcpy(n->initiator, name, h[2]);
	return true;
}

int pr_decode(struct pr_state *s, const uint8_t *buf, size_t len)
{
	struct pr_state t;
	struct rd r;
	uint32_t total, nreg;
	uint16_t flags, holder;

	if (len < IMG_HDR || get32(buf) != IMG_MAGIC || get16(buf + 4) != IMG_VERSION)
		return -EBADMSG;
	flags = get16(buf + 6);
	total = get32(buf + 8);
	nreg = get16(buf + 16);
	holder = get16(buf + 18);
	if ((flags & ~(IMG_F_APTPL | IMG_F_LEGACY)) || total < IMG_HDR || total > len ||
	    nreg > PR_MAX_REG || buf[21] || buf[22] || buf[23])
		return -EBADMSG;
	pr_init(&t);
	t.generation = get32(buf + 12);
	t.aptpl = flags & IMG_F_APTPL;
	r.p = buf + IMG_HDR;
	r.left = total - IMG_HDR;
	for (uint32_t i = 0; i < nreg; i++) {
		const uint8_t *k = take(&r, 8);

		if (!k || !get_nexus(&r, &t.reg[i].n))
			return -EBADMSG;
		t.reg[i].key = get64(k);
		t.nreg = i + 1;
	}
	if (flags & IMG_F_LEGACY) {
		if (!get_nexus(&r, &t.legacy_nexus))
			return -EBADMSG;
		t.legacy = true;
	}
	if (r.left != 0)
		return -EBADMSG;
	t.holder = holder == IMG_NO_HOLDER ? -1 : holder;
	t.type = buf[20];
	if (!pr_valid(&t)) /* P1-P3: keys, duplicates, holder and type, legacy */
		return -EBADMSG;
	*s = t;
	return 0;
}

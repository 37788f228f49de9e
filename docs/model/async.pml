/*
 * The asynchronous stream of Tandem (docs/ASYNC.md, src/repl/repl_async.c
 * A1-A10): a primary whose writes are streamed to its peer or, when the
 * backlog is full, marked out of sync and copied by a live resync (RS_START,
 * RS_DATA, RS_DONE) while the stream goes on.
 *
 * Checked with spin by tests/model/run.sh; docs/model/README.md ("The async
 * stream") says what is modelled and what is left out.
 *
 * The primary makes writes W1..W_NW, each to one of NR regions (any
 * choice); write i writes the value i, so a region holds the number of the
 * last write to it (0: none yet). Each write is either
 *   - streamed: an entry goes to the end of the primary's queue (ab_queue);
 *     a step hands the head of the queue to the link (ab_pump); or
 *   - marked (ahead: the backlog is full, or the volume stays ahead): its
 *     region's bit is set. From established, the resync is to start
 *     (rs_start_wait) and until RS_START is sent every write is marked (A9).
 * The link is FIFO. The primary sends RS_START, then for each marked region
 * RS_DATA with the region's current value (the read and its send are one
 * step: R4 discards a read that a write overtakes before it is sent), then
 * RS_DONE. Resync data and RS_START/RS_DONE go to the end of the link: ahead
 * of entries still in the queue, behind every entry already handed on.
 * The secondary applies the link's messages in arrival order (R5): an
 * entry or RS_DATA writes its region; RS_START makes it inconsistent;
 * RS_DONE makes it uptodate. An application is its acknowledgement: the
 * primary knows at once (acks that arrive later only delay what the primary
 * may do; see the README).
 *
 * Properties (asserted where the state they read changes):
 *   AP1. Whenever the secondary is uptodate, its image is a prefix state of
 *        the primary's writes: for some k, every region holds the last write
 *        to it among W1..Wk (or its initial value). Checked after every
 *        message the secondary applies; also the image a kept copy takes
 *        at RS_START (repl_cp.c), since RS_START arrives at an uptodate node.
 *   AP2. Whenever the primary would report SYNCED to a witness (it is
 *        established with the peer up to date, after RS_DONE went out), the
 *        secondary's image is such a prefix. Checked at RS_DONE and after
 *        every message the secondary applies.
 *   AP3. The resync ends: once the writes stop and nothing can move, the
 *        queue and the link are empty, nothing is marked, the secondary is
 *        uptodate and its image is the primary's.
 *
 * The rule (commit 128b80e):
 *   A7. Before the resync read of region Y, every queued entry up to the
 *       last one of region Y is handed to the link (ab_push).
 *   A8. RS_DONE goes only once the secondary has applied every entry made
 *       before the newest resync read (rs_need_sn, ab_settled).
 *   A9. RS_START goes behind every entry queued before it, and until it is
 *       sent the volume stays ahead (writes are marked, not streamed).
 *
 * Seeded bugs (each must make spin report a violation):
 *   MUT_DONE_AT_ONCE          A8 skipped (C before 128b80e): RS_DONE as soon
 *                             as nothing is marked and the resync data is
 *                             applied, whatever entries still wait
 *   MUT_NO_A7                 A7 skipped: resync data of a region may
 *                             overtake an older queued entry of that region
 *   MUT_STREAM_BEFORE_START   A9's second half skipped: writes are streamed
 *                             again while RS_START still waits
 * PROBE=1: RS_DONE goes while an entry is still on its way (A8 does not
 * wait for the whole stream). PROBE=2: resync data goes ahead of an entry
 * still queued (the overtaking that A7 and A8 allow for).
 */

/* Bounds: writes, regions (2 or 3). */
#ifndef NW
#define NW 4
#endif
#ifndef NR
#define NR 2
#endif
#if NW > 7
#error "NW: at most 7 (entry bits in a byte)"
#endif
#if NR < 2 || NR > 3
#error "NR: 2 or 3"
#endif

#define ALL 255 /* ab_push: the whole queue */
#define LINKCAP (2 * NW + 2)

mtype = { M_ENTRY, M_RS_START, M_RS_DATA, M_RS_DONE };

/* The connection, primary to secondary: kind, region, value. */
chan link = [LINKCAP] of { mtype, byte, byte };

/* ----- the primary ----- */
byte pimg[NR];     /* its image: per region, the number of the last write */
byte wreg[NW + 1]; /* the region of write i (1..nw) */
byte nw;           /* writes made so far */
byte q[NW];        /* ab_queue: write numbers of entries not yet handed on */
byte qn;
byte unacked;   /* bit i: the entry of write i is not yet applied (queued or on the link) */
byte marked;    /* bit y: region y is out of sync (the change bitmap) */
byte rsfly;     /* RS_DATA sent and not yet applied (rs_inflight) */
byte need;      /* A8: rs_need_sn: writes made before the newest resync read */
bool startwait; /* A9: rs_start_wait: RS_START is due, the volume stays ahead */
bool syncsrc;   /* rstate: syncsource (a live resync runs); else established */

/* ----- the secondary ----- */
byte simg[NR];
bool uptodate = true; /* its disk: uptodate, else inconsistent */

/* A8, ab_settled: the secondary applied every entry of the writes made
 * before the newest resync read (1..need) */
#ifndef MUT_DONE_AT_ONCE
#define SETTLED ((unacked & ((2 << need) - 1)) == 0)
#else
#define SETTLED true
#endif

/* SYNCED to a witness (repl_quorum.c want_flags): established, peer
 * uptodate; both change together in rs_start_live and rs_finish. */
#define SYNCED (!syncsrc)

/* scratch of the atomic steps, not part of the state */
hidden byte t_j, t_n, t_k, t_y, t_v; /* t_y, t_v, t_m: the message received */
hidden mtype t_m;
hidden byte t_ok, t_eq;
hidden byte t_last[NR];

/* t_ok: simg is a prefix state of W1..Wk for some k <= nw */
inline prefix_check()
{
	t_ok = false;
	t_k = 0;
	t_j = 0;
	do
	:: t_j < NR -> t_last[t_j] = 0; t_j++
	:: else -> break
	od;
	do
	:: true ->
		t_eq = true;
		t_j = 0;
		do
		:: t_j < NR ->
			if
			:: simg[t_j] != t_last[t_j] -> t_eq = false
			:: else -> skip
			fi;
			t_j++
		:: else -> break
		od;
		if
		:: t_eq -> t_ok = true; break
		:: else -> skip
		fi;
		if
		:: t_k >= nw -> break
		:: else -> skip
		fi;
		t_k++;
		t_last[wreg[t_k]] = t_k
	od;
	t_j = 0;
	do
	:: t_j < NR -> t_last[t_j] = 0; t_j++
	:: else -> break
	od;
	t_k = 0;
	t_j = 0
}

inline send(kind, y, v)
{
	assert(nfull(link));
	link!kind, y, v
}

/* the head of the queue to the link */
inline hand_one()
{
	printf("MSC: the entry of W%d handed to the link\n", q[0]);
	send(M_ENTRY, wreg[q[0]], q[0]);
	t_j = 1;
	do
	:: t_j < qn -> q[t_j - 1] = q[t_j]; t_j++
	:: else -> break
	od;
	qn--;
	q[qn] = 0;
	t_j = 0
}

/* ab_push (A7, A9): every queued entry up to the last one of region y
 * (ALL: the whole queue) to the link, in order. */
inline ab_push(y)
{
	t_n = 0;
	t_j = 0;
	do
	:: t_j < qn ->
		if
		:: y == ALL || wreg[q[t_j]] == y -> t_n = t_j + 1
		:: else -> skip
		fi;
		t_j++
	:: else -> break
	od;
	do
	:: t_n > 0 -> hand_one(); t_n--
	:: else -> break
	od;
	t_j = 0
}

/* a write of region y: local, acknowledged */
inline pwrite(y)
{
	nw++;
	wreg[nw] = y;
	pimg[y] = nw
}

/* ab_queue_io: the write streamed, its entry at the end of the queue */
inline stream()
{
	q[qn] = nw;
	qn++;
	unacked = unacked | (1 << nw);
	printf("MSC: W%d to region %d, streamed (queued)\n", nw, wreg[nw])
}

/* ab_mark: ahead, the write marked; from established, RS_START is due */
inline mark()
{
	marked = marked | (1 << wreg[nw]);
	if
	:: !syncsrc -> startwait = true
	:: else -> skip /* rs_total grows: the running resync takes it */
	fi;
	printf("MSC: W%d to region %d, marked\n", nw, wreg[nw])
}

/* rs_pump_resync: the read of marked region y, sent at once */
inline rs_read(y)
{
#ifndef MUT_NO_A7
	ab_push(y);
#endif
#if PROBE == 2
	assert(qn == 0);
#endif
	marked = marked & ~(1 << y);
	need = nw; /* A8: every entry made so far is older */
	rsfly++;
	printf("MSC: RS_DATA of region %d (W%d) sent\n", y, pimg[y]);
	send(M_RS_DATA, y, pimg[y])
}

/* A9: streamed only while RS_START is not waiting (the volume stays ahead) */
#ifndef MUT_STREAM_BEFORE_START
#define STREAM_OK (!startwait)
#else
#define STREAM_OK true
#endif

/* Every nondeterministic choice is a do-option of its own, each step one
 * d_step: the scratch variables (hidden) never carry a choice from one
 * stored state to the next. */
proctype Primary()
{
end_primary:
	do
	/* a write to region 0, 1 (or 2): streamed, or marked */
	:: d_step { nw < NW && STREAM_OK -> pwrite(0); stream() }
	:: d_step { nw < NW -> pwrite(0); mark() }
	:: d_step { nw < NW && STREAM_OK -> pwrite(1); stream() }
	:: d_step { nw < NW -> pwrite(1); mark() }
#if NR > 2
	:: d_step { nw < NW && STREAM_OK -> pwrite(2); stream() }
	:: d_step { nw < NW -> pwrite(2); mark() }
#endif
	/* ab_pump: the oldest queued entry to the connection */
	:: d_step { qn > 0 -> hand_one() }
	/* rs_start_live (A9): the queue first, then RS_START */
	:: d_step {
		startwait ->
		ab_push(ALL);
		printf("MSC: RS_START sent\n");
		send(M_RS_START, 0, 0);
		startwait = false;
		syncsrc = true
	}
	/* rs_pump_resync: a marked region read and sent */
	:: d_step { syncsrc && (marked & 1) != 0 -> rs_read(0) }
	:: d_step { syncsrc && (marked & 2) != 0 -> rs_read(1) }
#if NR > 2
	:: d_step { syncsrc && (marked & 4) != 0 -> rs_read(2) }
#endif
	/* rs_finish: RS_DONE; established, the peer uptodate (SYNCED) */
	:: d_step {
		syncsrc && marked == 0 && rsfly == 0 && !startwait && SETTLED ->
#if PROBE == 1
		assert(unacked == 0);
#endif
		printf("MSC: RS_DONE sent\n");
		send(M_RS_DONE, 0, 0);
		syncsrc = false;
		prefix_check();
		assert(t_ok) /* AP2 */
	}
	/* AP3: nothing can move any more */
	:: timeout ->
		d_step {
			assert(nw == NW && qn == 0 && len(link) == 0 && marked == 0 && rsfly == 0);
			assert(!syncsrc && !startwait && uptodate);
			t_j = 0;
			do
			:: t_j < NR -> assert(simg[t_j] == pimg[t_j]); t_j++
			:: else -> break
			od;
			t_j = 0
		};
		break
	od
}

proctype Secondary()
{
end_secondary:
	do
	:: d_step {
		link?t_m, t_y, t_v ->
		printf("MSC: the secondary applies %e region %d value W%d\n", t_m, t_y, t_v);
		if
		:: t_m == M_ENTRY ->
			simg[t_y] = t_v;
			unacked = unacked & ~(1 << t_v)
		:: t_m == M_RS_DATA ->
			simg[t_y] = t_v;
			rsfly--
		:: t_m == M_RS_START ->
			assert(uptodate);
			uptodate = false
		:: t_m == M_RS_DONE ->
			assert(!uptodate);
			uptodate = true
		fi;
		prefix_check();
		assert(t_ok || !uptodate); /* AP1 */
		assert(t_ok || !SYNCED);   /* AP2 */
		t_m = 0;
		t_y = 0;
		t_v = 0
	}
	od
}

init {
	atomic {
		run Primary();
		run Secondary()
	}
}

/*
 * The replay protocol of swift-outbox, as a Promela model for SPIN (decision 013).
 *
 * One device's log of W writes, passes run by one or two processes sharing it, the app's queue calls,
 * SIGKILLs and a power loss at every step, a network that loses requests and answers, and a server
 * that is either the reference instance (the contract: one request a batch, an idempotency table,
 * the acknowledged watermark) or PostgREST in front of plain tables (one request a write).
 *
 * Configuration, by -D when SPIN generates the verifier (scripts/model-check):
 *   CONTRACT or POSTGREST      the transport and its server
 *   KEYONLY_FUNCTION           PostgREST's custom function deduplicates on X-Idempotency-Key alone
 *   ROW_FOLLOWER=UPD           PostgREST's second write to the row updates it (by default, deletes it)
 *   PASSES=1|2                 processes syncing the log
 *   KILLS, POWERLOSS, NETFAULTS, SERVERREFUSALS, APPCALLS   the bounds of what can go wrong
 * Mutants: each undoes one rule the code keeps, and must produce a counterexample:
 *   M_ANSWERS_AFTER_BATCH   PostgREST answers recorded only after the batch's last request (the
 *                           kill-mid-batch bug of issue 24)
 *   M_NO_PASS_LOCK          no sync lock (R5.7)
 *   M_FRESH_KEY_ON_RESTART  a write in doubt resent under a fresh key after a crash
 *   M_FINAL_HOLDS_ROW       a write refused for good still holds the writes to its row (the R3.1 hole)
 *   M_NO_FLUSH_BEFORE_FOLLOWER  the answer a request follows need not be durable when it is sent
 *                           (found by this model: the code before decision 013)
 *   M_VOLATILE_WATERMARK    the watermark counts answers not yet durable
 */

#ifndef PASSES
#define PASSES 2
#endif
#ifndef KILLS
#define KILLS 1
#endif
#ifndef POWERLOSS
#define POWERLOSS 1
#endif
#ifndef NETFAULTS
#define NETFAULTS 1
#endif
#ifndef SERVERREFUSALS
#define SERVERREFUSALS 1
#endif
#ifndef APPCALLS
#define APPCALLS 1
#endif

#define W 3
#define MAXREFUSALS 2
#ifndef ROW_FOLLOWER
#define ROW_FOLLOWER DEL   /* PostgREST: what W1 does to W0's row (DEL or UPD) */
#endif

/* A write's state in the log. */
#define ABSENT 0    /* not queued yet */
#define PENDING 1
#define ANSWERED 2  /* accepted, merged or conflicted: final */
#define REFUSED 3   /* refused, not for good: sent again on a later pass */
#define DEAD 4      /* refused MAXREFUSALS times: held until released or discarded */
#define FINAL 5     /* refused for good (unsent, unmade): never sent, holds nothing */
#define REMOVED 6   /* cancelled or discarded (withdrawn, for ordering) */

/* Operations. */
#define INS 1
#define UPD 2
#define DEL 3
#define CUS 4       /* a custom mutation whose function deduplicates on X-Idempotency-Key */
#define PUT 5       /* a write through the contract */

/* What one request's answer said of one write. */
#define R_NONE 0
#define R_ACCEPTED 1
#define R_REFUSED 2
#define R_CONFLICTED 3
#define R_LOST 4    /* no answer: the request or its answer was lost (a failure that may pass) */
#define R_SKIPPED 5 /* not applied, behind a write refused in the same request */

/* The writes: W0 and W1 to row 0, W2 to row 1. */
byte op[W];
byte row[W];
byte deps[W];       /* bit d: write d is one this write follows (R2.2) */

/* The log as the processes read it (st...) and as a power loss leaves it (dst...): a commit made
 * with MDB_NOMETASYNC is durable once the next commit has synced its data (R2.3). */
byte st[W]; bool att[W]; byte key[W]; byte refs[W];
bool doubt[W];      /* the write's last attempt has no verdict recorded: its outcome is unknown */
byte dst[W]; bool datt[W]; byte dkey[W]; byte drefs[W]; bool ddoubt[W];
bool acked[W];      /* enqueue returned */
byte unmade = 255;  /* the write the transport cannot make, if any (chosen at the start) */

/* The sync lock (R5.7): 0 free, else the holder's number + 1. The OS frees it when the holder dies. */
byte lock = 0;
bool alive[PASSES];

/* The server. */
byte rowv[2];       /* 0 absent, else 1 + the write whose value the row holds */
byte applied[W];    /* times each write took effect */
byte lastApplied[2];/* 1 + the latest write applied to each row */
bool deleted[2];    /* the row's last write, a delete, took effect */
byte seenKeys[W];   /* custom functions: bit k, the write was applied under key k (or k = 0: at all) */
/* What the custom function deduplicates on: X-Outbox-Origin and X-Outbox-Write, or (KEYONLY_FUNCTION)
 * X-Idempotency-Key alone, which a release renews. */
#ifdef KEYONLY_FUNCTION
#define FUNCTION_KEY(w) key[w]
#else
#define FUNCTION_KEY(w) 0
#endif
byte stored[W];     /* contract: the answer kept for (origin, id), R_NONE when none or pruned */
byte watermark = 0; /* contract: writes below it have their answer durably in the log (R8.9) */
bool otherDevice = false; /* the same user's other device wrote row 0 */
bool sent[W];       /* a request for the write went out */
byte refusedNow = 0; /* contract: the writes refused so far in the request being applied */
/* Scratch, used only inside atomic steps, so kept out of the state vector. */
hidden byte i, d;
hidden byte lost;

byte kills = KILLS;
byte powerloss = POWERLOSS;
byte netfaults = NETFAULTS;
byte serverrefusals = SERVERREFUSALS;

#ifdef M_FINAL_HOLDS_ROW
#define SETTLED(s) (s == ANSWERED || s == REMOVED)
#else
#define SETTLED(s) (s == ANSWERED || s == FINAL || s == REMOVED)
#endif
#define SENDABLE(w) ((st[w] == PENDING || st[w] == REFUSED) && w != unmade)
/* every write this one follows is settled, or goes before it in the same batch */
#define READY(w, batch) (((deps[w] & 1) == 0 || SETTLED(st[0]) || (batch & 1)) \
                      && ((deps[w] & 2) == 0 || SETTLED(st[1]) || (batch & 2)) \
                      && ((deps[w] & 4) == 0 || SETTLED(st[2]) || (batch & 4)))

/* Commits. A full commit (enqueue, the queue calls) is durable when it returns; a pass's commit is
 * made with MDB_NOMETASYNC: its data sync makes the commit before it durable, and it stays undone
 * by a power loss until the next commit. */
inline durable() {
    for (i : 0 .. W-1) { dst[i] = st[i]; datt[i] = att[i]; dkey[i] = key[i]; drefs[i] = refs[i]; ddoubt[i] = doubt[i] }
}

/* A verdict on write w, as the decider records it (R4.3). A final verdict never changes. */
inline verdict(w, answer) {
    if
    :: answer == R_NONE || answer == R_LOST -> skip   /* no verdict: the write stays as it was */
    :: answer == R_SKIPPED -> doubt[w] = false        /* answered, not applied: it stays as it was */
    :: answer != R_NONE && answer != R_LOST && answer != R_SKIPPED && (st[w] == REMOVED || st[w] == ABSENT) ->
        skip   /* the fold ignores a write the queue no longer holds */
    :: else ->
        /* the log records answers only to requests that went out */
        assert(sent[w]);
        /* a write refused for good was never sent; an answered one is answered again only by a replay */
        assert(st[w] != FINAL);
        assert(st[w] != ANSWERED || answer == R_ACCEPTED || answer == R_CONFLICTED);
        doubt[w] = false;
        if
        :: answer == R_ACCEPTED || answer == R_CONFLICTED -> st[w] = ANSWERED
        :: answer == R_REFUSED ->
            /* the soak's rule: a write that took effect is never refused */
            assert(applied[w] == 0);
            refs[w]++;
            if
            :: refs[w] >= MAXREFUSALS -> st[w] = DEAD
            :: else -> st[w] = REFUSED
            fi
        fi
    fi
}

/* The server applies write w: inserts, custom mutations and contract writes at most once, updates
 * and deletes at least once with the effect of once (R9.3); per-row order holds, and a deleted row
 * never comes back. */
inline apply(w) {
    assert(applied[w] == 0 || op[w] == UPD || op[w] == DEL);
    assert(lastApplied[row[w]] <= w + 1);
    assert(!(deleted[row[w]] && op[w] != DEL));
    lastApplied[row[w]] = w + 1;
    applied[w]++;
    deleted[row[w]] = (op[w] == DEL)
}

/* PostgREST in front of plain tables (R9.2, R9.3): the answer to one write's request. */
inline postgrest(w, answer) {
    sent[w] = true;
    if
    :: netfaults > 0 -> netfaults--; answer = R_LOST        /* the request is lost */
    :: serverrefusals > 0 && op[w] != DEL && applied[w] == 0 -> serverrefusals--; answer = R_REFUSED  /* a rule refuses it, this time */
    :: true ->
        if
        :: op[w] == INS ->
            if
            :: rowv[row[w]] == 0 -> apply(w); rowv[row[w]] = w + 1; answer = R_ACCEPTED
            /* 23505, read back: the stored row is the one sent (replayed), or another (refused) */
            :: rowv[row[w]] == w + 1 -> answer = R_ACCEPTED
            :: else -> answer = R_REFUSED
            fi
        :: op[w] == UPD ->
            if
            :: rowv[row[w]] == 0 -> answer = R_REFUSED      /* a Content-Range of zero rows: row_not_found */
            :: else -> apply(w); rowv[row[w]] = w + 1; answer = R_ACCEPTED
            fi
        :: op[w] == DEL -> apply(w); rowv[row[w]] = 0; answer = R_ACCEPTED
        :: op[w] == CUS ->
            if
            :: (seenKeys[w] >> FUNCTION_KEY(w)) & 1 -> answer = R_ACCEPTED
            :: else -> apply(w); seenKeys[w] = seenKeys[w] | (1 << FUNCTION_KEY(w)); answer = R_ACCEPTED
            fi
        fi;
        /* it took effect, and the answer is lost on the way back */
        if
        :: netfaults > 0 -> netfaults--; answer = R_LOST
        :: true -> skip
        fi
    fi
}

/* The reference instance (R8.9, Specs/contract.md): one request for the batch, applied in order in
 * one transaction; each write's answer kept under (origin, id) until the watermark passes it. */
inline contract(batch, mark) {
    watermark = (mark > watermark -> mark : watermark);
    for (i : 0 .. W-1) {
        if
        :: stored[i] != R_NONE && i < watermark -> stored[i] = R_NONE
        :: else -> skip
        fi
    }
    if
    :: netfaults > 0 -> netfaults--; lost = 1   /* the request is lost */
    :: true ->
        for (i : 0 .. W-1) {
            if
            :: (batch >> i) & 1 ->
                sent[i] = true;
                /* a resend below the watermark is a broken contract (R8.9) */
                assert(i >= watermark);
                if
                :: stored[i] != R_NONE -> answers[i] = stored[i]   /* replayed */
                /* a write that follows one refused in this request is skipped, not applied */
                :: stored[i] == R_NONE && (deps[i] & batch & refusedNow) -> answers[i] = R_SKIPPED
                :: stored[i] == R_NONE && !(deps[i] & batch & refusedNow) && serverrefusals > 0 && applied[i] == 0 ->
                    serverrefusals--; answers[i] = R_REFUSED; refusedNow = refusedNow | (1 << i)
                :: stored[i] == R_NONE && !(deps[i] & batch & refusedNow) ->
                    apply(i);
                    answers[i] = (row[i] == 0 && otherDevice -> R_CONFLICTED : R_ACCEPTED);
                    stored[i] = answers[i]
                fi
            :: else -> answers[i] = R_NONE
            fi
        }
        refusedNow = 0;
        if
        :: netfaults > 0 -> netfaults--; lost = 1   /* applied, and the answer lost */
        :: true -> skip
        fi
    fi;
    for (i : 0 .. W-1) {
        if
        :: lost && ((batch >> i) & 1) -> answers[i] = R_LOST
        :: else -> skip
        fi
    }
    lost = 0
}
/* The watermark the client sends: every write below it settled for good, durably. */
inline acknowledged(mark) {
    mark = 0;
    do
#ifdef M_VOLATILE_WATERMARK
    :: mark < W && (st[mark] == ANSWERED || st[mark] == FINAL || st[mark] == REMOVED) -> mark++
#else
    :: mark < W && (dst[mark] == ANSWERED || dst[mark] == FINAL || dst[mark] == REMOVED) -> mark++
#endif
    :: else -> break
    od
}

/* The planner's next batch: in id order, each write sendable and ready, none sent earlier in the
 * pass (a refused write goes again on a later pass); a write the transport cannot make is refused
 * for good (unmade, R4.3). */
inline plan(batch, tried) {
    batch = 0;
    for (i : 0 .. W-1) {
        if
        :: i == unmade && (st[i] == PENDING || st[i] == REFUSED) -> st[i] = FINAL
        :: i != unmade && !((tried >> i) & 1) && SENDABLE(i) && READY(i, batch) -> batch = batch | (1 << i)
        :: else -> skip
        fi
    }
}

/* attemptStarted for each write of the batch. */
inline attempt(batch) {
    for (i : 0 .. W-1) { if :: (batch >> i) & 1 -> att[i] = true; doubt[i] = true :: else -> skip fi }
}

/* One pass (Pass.run): lock, plan a batch, send it, record what came back. */
proctype Pass(byte me) {
    byte batch, w, next, mark, answers[W], kept[W];
    byte answer;
    byte tried, answered;   /* the writes sent in this pass, and those answered in the last commit */
restart:
    {
        do
        :: true ->
#ifndef M_NO_PASS_LOCK
            atomic { lock == 0 -> lock = me + 1 };
#endif
            /* plan (Planner) and the attempt (attemptStarted), in one commit */
            atomic {
                durable();
                plan(batch, 0);
#ifdef POSTGREST
                /* one request a write: the first goes now, each later one after the answer before it */
                next = 0;
                do
                :: next < W && !((batch >> next) & 1) -> next++
                :: else -> break
                od;
                if
                :: next < W -> { att[next] = true; doubt[next] = true }
                :: else -> skip
                fi
#else
                attempt(batch);
                acknowledged(mark)   /* the watermark the request carries */
#endif
            };
#ifdef CONTRACT
            do
            :: batch == 0 -> break
            :: batch != 0 ->
                atomic { contract(batch, mark) };
                /* the answers, and the plan and attempt of the next batch, in one commit */
                atomic {
                    durable();
                    tried = tried | batch;
                    answered = 0;
                    for (i : 0 .. W-1) {
                        if
                        :: answers[i] == R_LOST -> tried = 7   /* a failure that may pass stops the pass */
                        :: answers[i] == R_ACCEPTED || answers[i] == R_CONFLICTED -> answered = answered | (1 << i)
                        :: else -> skip
                        fi;
                        verdict(i, answers[i]);
                        answers[i] = R_NONE
                    }
                    plan(batch, tried);
                    attempt(batch);
#ifndef M_NO_FLUSH_BEFORE_FOLLOWER
                    if
                    :: (deps[0] * ((batch >> 0) & 1) | deps[1] * ((batch >> 1) & 1) | deps[2] * ((batch >> 2) & 1)) & answered -> durable()
                    :: else -> skip
                    fi;
#endif
                    acknowledged(mark)
                }
            od;
            tried = 0; answered = 0;
#else
            do
            :: next >= W -> break
            :: next < W ->
                w = next;
                atomic { postgrest(w, answer) };
#ifdef M_ANSWERS_AFTER_BATCH
                kept[w] = answer;
                /* the next request goes on the answers held in memory */
                if
                :: answer == R_LOST -> next = W
                :: else ->
                    next = w + 1;
                    do
                    :: next < W && !(((batch >> next) & 1) && (kept[w] == R_ACCEPTED || !((deps[next] >> w) & 1))) -> next++
                    :: else -> break
                    od;
                    if :: next < W -> atomic { { att[next] = true; doubt[next] = true } } :: else -> skip fi
                fi;
                if
                :: next >= W ->
                    atomic {
                        durable();
                        for (i : 0 .. W-1) {
                            if
                            :: ((batch >> i) & 1) && kept[i] != R_NONE -> verdict(i, kept[i]); kept[i] = R_NONE
                            :: else -> skip
                            fi
                        }
                    }
                :: else -> skip
                fi
#else
                /* the answer, and the attempt of the next request, in one commit */
                atomic {
                    durable();
                    verdict(w, answer);
                    if
                    :: answer == R_LOST -> next = W   /* a failure that may pass stops the pass */
                    :: else ->
                        next = w + 1;
                        do
                        :: next < W && !(((batch >> next) & 1) && SENDABLE(next) && READY(next, 0)) -> next++
                        :: else -> break
                        od;
                        if
                        :: next < W ->
                            { att[next] = true; doubt[next] = true };
#ifndef M_NO_FLUSH_BEFORE_FOLLOWER
                            /* a request that follows a write answered in this commit goes once the
                             * commit is durable */
                            if
                            :: (deps[next] >> w) & 1 -> durable()
                            :: else -> skip
                            fi
#endif
                        :: else -> skip
                        fi
                    fi
                }
#endif
            od;
#endif
            /* the pass ends: the lock is freed, and nothing of it stays in memory */
            atomic {
#ifndef M_NO_PASS_LOCK
                lock = 0;
#endif
                batch = 0; next = 0; w = 0; answer = 0; mark = 0; tried = 0; answered = 0;
                answers[0] = R_NONE; answers[1] = R_NONE; answers[2] = R_NONE
            }
        od
    } unless { !alive[me] };
    /* killed: the OS frees the lock; the process starts again with nothing in memory */
    atomic {
        if :: lock == me + 1 -> lock = 0 :: else -> skip fi;
#ifdef M_FRESH_KEY_ON_RESTART
        for (i : 0 .. W-1) { if :: doubt[i] -> key[i]++ :: else -> skip fi }
#endif
        for (i : 0 .. W-1) { kept[i] = R_NONE; answers[i] = R_NONE }
        batch = 0; next = 0; w = 0; answer = 0; mark = 0; tried = 0; answered = 0;
        alive[me] = true
    };
    goto restart
}

#define DOUBTFUL_DEPENDENT(d) ((((deps[0] >> d) & 1) && doubt[0]) || (((deps[1] >> d) & 1) && doubt[1]) || (((deps[2] >> d) & 1) && doubt[2]))

/* The app: enqueues the writes in order (each durable when it returns, R2.3), and makes its calls. */
proctype App() {
    byte w = 0, calls = APPCALLS;
end:
    do
    :: w < W ->
        atomic {
            st[w] = PENDING; key[w] = 1;
            deps[w] = 0;
            for (d : 0 .. W-1) {
                if :: d < w && row[d] == row[w] && !SETTLED(st[d]) -> deps[w] = deps[w] | (1 << d) :: else -> skip fi
            }
            durable();
            acked[w] = true;
            w++
        }
    :: calls > 0 ->
        atomic {
            if
            :: d = 0 :: d = 1 :: d = 2
            fi;
            calls--;
            if
            /* release (R6.3): sent again, under a fresh key */
            :: st[d] == REFUSED || st[d] == DEAD ->
                st[d] = PENDING; key[d]++
            /* discard with its dependents (R6.2): they are refused unsent, for good. Not a write whose
             * last attempt is in doubt, nor one with such a dependent: it may be on its way. */
            :: (st[d] == REFUSED || st[d] == DEAD) && !doubt[d] && !DOUBTFUL_DEPENDENT(d) ->
                st[d] = REMOVED;
                for (i : 0 .. W-1) {
                    if :: (deps[i] >> d) & 1 && (st[i] == PENDING || st[i] == REFUSED || st[i] == DEAD) -> st[i] = FINAL
                       :: else -> skip fi
                }
            /* cancel (R6.6): a write never attempted; its same-row followers go on */
            :: st[d] == PENDING && !att[d] -> st[d] = REMOVED
            :: else -> skip
            fi;
            durable()
        }
    :: w == W && calls == 0 -> break
    od
}

/* What goes wrong: SIGKILLs of a syncing process, a power loss, the other device's write. */
proctype Faults() {
end:
    do
    :: kills > 0 -> atomic { kills--; alive[0] = false }
#if PASSES > 1
    :: kills > 0 -> atomic { kills--; alive[1] = false }
#endif
    :: powerloss > 0 ->
        atomic {
            powerloss--;
            for (i : 0 .. W-1) {
                /* no acknowledged write is lost */
                assert(!acked[i] || dst[i] != ABSENT);
                st[i] = dst[i]; att[i] = datt[i]; key[i] = dkey[i]; refs[i] = drefs[i]; doubt[i] = ddoubt[i]
            }
            for (i : 0 .. PASSES-1) { alive[i] = false }
        }
#ifdef CONTRACT
    :: !otherDevice -> otherDevice = true
#endif
    od
}

/* Done: every write answered, refused for good, taken out, or dead, or waiting behind a dead write
 * (a state the app must act on). Never behind a settled write. */
#define HELD(w) ((st[w] == PENDING || st[w] == REFUSED) && \
    (((deps[w] & 1) && st[0] == DEAD) || ((deps[w] & 2) && (st[1] == DEAD || st[1] == PENDING && (deps[1] & 1) && st[0] == DEAD))))
#define DONE(w) (st[w] == ANSWERED || st[w] == FINAL || st[w] == REMOVED || st[w] == DEAD || HELD(w))
ltl settles { <> [] (DONE(0) && DONE(1) && DONE(2)) }

init {
#ifdef POSTGREST
    op[0] = INS; row[0] = 0;
    op[1] = ROW_FOLLOWER; row[1] = 0;
    op[2] = CUS; row[2] = 1;
#else
    op[0] = PUT; row[0] = 0;
    op[1] = PUT; row[1] = 0;
    op[2] = PUT; row[2] = 1;
#endif
    if
    :: unmade = 255
    :: unmade = 0
    fi;
    atomic {
        for (i : 0 .. PASSES-1) { alive[i] = true; run Pass(i) }
        run App();
        run Faults()
    }
}

// One job per run directory: RUN/lock, held with flock(2) by rank 0 for the job's life.
// The file says who holds it (host, pid, run id, since when), so a second job is refused
// with the holder's name. The kernel drops the lock when the holder dies (a crash, SIGKILL,
// a node gone: on NFS when the server's lease on the dead client expires), so a requeued
// job is never blocked by a stale file, only by a live job. RUN itself is flock'ed too, so
// `rm RUN/lock` while the job runs does not let a second job in.
// defines: zt_run_lock, zt_run_lock_acquire, zt_run_lock_set_run_id, zt_run_lock_verify, zt_run_lock_release
#ifndef ZT_RUN_LOCK_H
#define ZT_RUN_LOCK_H

typedef struct zt_run_lock zt_run_lock;

// Creates RUN (if needed) and takes RUN/lock without waiting. -1 + zt_err when another
// job holds it (naming host, pid, run id and since when) or when the file system cannot
// lock (naming the error; docs/operations.md says what to do there).
int zt_run_lock_acquire(const char *run_dir, zt_run_lock **out);
// Records the run id once it is known (a resumed run takes its checkpoint's).
int zt_run_lock_set_run_id(zt_run_lock *l, const char *run_id);
// Before a commit (rank 0): RUN/lock is still the file this job locked. When it was removed or
// replaced: where RUN itself is locked, written again (locked, naming this job) with a warning;
// where the file system could not lock the directory, -1 + zt_err (another job may have taken a
// new RUN/lock). NULL is fine.
int zt_run_lock_verify(zt_run_lock *l);
// Releases the lock (the file stays, holding the last holder's description). NULL is fine.
void zt_run_lock_release(zt_run_lock *l);

#endif

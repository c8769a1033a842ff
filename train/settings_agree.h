// Every rank's settings agree before a job touches anything (train/settings_agree.c).
// Each rank resolves its own flags and reads its own --config file, so a run file that
// differs between nodes (a stale copy on one of them) would otherwise train silently
// wrong, deadlock, or hang in start-up.
// defines: zt_settings_agree, zt_settings_diff, zt_settings_gather_diff
#ifndef ZT_TRAIN_SETTINGS_AGREE_H
#define ZT_TRAIN_SETTINGS_AGREE_H
#include <mpi.h>
#include <stddef.h>

// Collective over comm: every rank gives its resolved settings as a JSON object (key ->
// value; `zt_flags_config_json`'s) plus the path and CRC-32C of its --config file (NULL
// path: none). 0 when all agree; otherwise -1 on every rank, zt_err naming each setting
// that differs, its values and the ranks holding each value. Keys in `per_rank` (NULL-
// terminated; may be NULL) may differ (execution resources that change no result).
int zt_settings_agree(MPI_Comm comm, const char *settings_json, const char *config_file, unsigned config_crc32c,
                      const char *const *per_rank);

// The comparison itself, for tests: n ranks' settings texts (as zt_settings_agree sends
// them: one "key=value" line per setting) -> the number of settings that differ and, in
// out, the description (empty when none).
int zt_settings_diff(const char *const *texts, int n, const char *const *per_rank, char *out, size_t cap);
// Collective over comm: each rank's text of "key=value" lines gathered on rank 0 and compared
// there (zt_settings_diff); every rank gets the number of keys that differ and, in msg (cap
// bytes, the same on every rank), their description. zt_settings_agree's, and the inputs'
// (train/input_digest.h).
int zt_settings_gather_diff(MPI_Comm comm, const char *text, const char *const *per_rank, char *msg, size_t cap);
#endif

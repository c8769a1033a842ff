// TensorBoard event files written in C: TFRecord framing (length, masked CRC-32C of the
// length, payload, masked CRC-32C of the payload) around Event protocol buffers encoded
// by hand (wall_time, step, file_version or a Summary of scalar Values). No protobuf
// library. TensorBoard, torch.utils.tensorboard and tf.summary read these files.
// defines: zt_tb, zt_tb_open, zt_tb_scalar, zt_tb_flush, zt_tb_close, zt_tb_truncate_dir,
//          zt_tb_masked_crc, zt_tb_encode_scalar
#ifndef ZT_TBOARD_H
#define ZT_TBOARD_H
#include <stddef.h>
#include <stdint.h>

typedef struct zt_tb zt_tb;

// Create DIR (and parents) and a new file DIR/events.out.tfevents.<unix time>.<host>
// beginning with the file_version event. NULL + zt_err on failure.
zt_tb *zt_tb_open(const char *dir, const char *host);
// One scalar (Summary.Value.simple_value) at `step`; buffered until zt_tb_flush.
int zt_tb_scalar(zt_tb *tb, const char *tag, int64_t step, double wall_time, float value);
int zt_tb_flush(zt_tb *tb);  // write and fflush the buffered events
void zt_tb_close(zt_tb *tb);

// A resumed run continues at step `keep_step`: in every event file of DIR, drop the
// records of later steps (written after the checkpoint the run resumed from), so the
// curves show each step once. Files are rewritten through a temporary and rename; a
// file with a damaged record is cut at that record (with a warning on stderr). Returns
// the number of records dropped, or -1 + zt_err.
int64_t zt_tb_truncate_dir(const char *dir, int64_t keep_step);

// Exposed for tests: TFRecord's masked CRC-32C, and one scalar Event's bytes (returns
// the length written to out, which must hold 64 + strlen(tag) bytes).
uint32_t zt_tb_masked_crc(const void *data, size_t n);
size_t zt_tb_encode_scalar(uint8_t *out, const char *tag, int64_t step, double wall_time, float value);
#endif

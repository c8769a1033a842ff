// Qwen3 dense model configuration: the type and its JSON codec are the checkpoint
// layer's (model/hf_config.h, shared with the training checkpoint); the model
// loads it from a file or a model directory.
// defines: zt_model_config_load
#ifndef ZT_CONFIG_H
#define ZT_CONFIG_H
#include "model/hf_config.h"

// path: a config.json file or a directory containing one.
int zt_model_config_load(zt_model_config *c, const char *path);
#endif

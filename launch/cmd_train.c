// `zerotrain train`: parse flags into zt_train_opts and run the training loop.
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "checkpoint/safetensors.h"
#include "launch/args.h"
#include "launch/commands.h"
#include "runtime/common.h"
#include "runtime/train.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: zerotrain train --data DIR --run-dir RUN (--model CONFIG|HF_DIR | --init HF_DIR) [options]\n"
            "\n"
            "Trains a Qwen3 dense model on a token dataset made by `zerotrain pack`.\n"
            "\n"
            "model and data:\n"
            "  --model PATH          config.json or a Hugging Face model directory (default: --init's config)\n"
            "  --init PATH           start from Hugging Face weights (directory with model.safetensors or a sharded\n"
            "                        model.safetensors.index.json, or one .safetensors file); without it parameters\n"
            "                        are initialised like transformers (normal(0, initializer_range), norms = 1)\n"
            "  --data DIR            dataset directory (dataset.json + uint32 block files)\n"
            "  --run-dir RUN         output: run.json, metrics.jsonl, final/ (created)\n"
            "  --overwrite           reuse a run directory that already holds a run\n"
            "  --no-verify-data      skip the crc32c check of the data files (token ids are always checked)\n"
            "  --no-preflight        skip the six-check gate (`zerotrain preflight`) that runs before training\n"
            "  --doc-attention A     isolated: a token attends only to earlier tokens of its own packed document\n"
            "                        and RoPE positions restart at 0 per document (needs a version 2 dataset,\n"
            "                        `pack --input chat`); full: every earlier token of the block (plain text).\n"
            "                        Default: what dataset.json says (isolated for chat data, else full)\n"
            "\n"
            "validation:\n"
            "  --eval-data DIR       held-out dataset (same seq_len and tokenizer): mean loss and perplexity\n"
            "                        over its blocks, on stdout and in metrics.jsonl (\"eval_loss\"); always\n"
            "                        after the last step. Never changes the training order, RNG or checkpoints\n"
            "  --eval-every N        also evaluate every N steps (default 0: only at the end)\n"
            "  --eval-batches K      micro-batches per rank per evaluation (default 0: all the blocks every\n"
            "                        rank has, the same count on every rank: evenfix applies here too)\n"
            "\n"
            "length and batch:\n"
            "  --steps N             optimizer steps (default: --epochs worth)\n"
            "  --epochs N            passes over the data (default 1); block order is reshuffled every epoch\n"
            "  --micro-batch B       blocks per forward/backward (default 1)\n"
            "  --grad-accum G        micro-batches per optimizer step (default 1)\n"
            "\n"
            "optimizer (AdamW, torch semantics; weight decay on matrices and embeddings, not norm weights):\n"
            "  --lr X                peak learning rate (default 1e-4)\n"
            "  --schedule S          cosine (default) or constant\n"
            "  --warmup N            linear warmup steps (default 0)\n"
            "  --min-lr-ratio R      cosine floor as a fraction of --lr (default 0.1)\n"
            "  --weight-decay X      (default 0.1)\n"
            "  --beta1 X, --beta2 X  (defaults 0.9, 0.95)\n"
            "  --adam-eps X          (default 1e-8)\n"
            "  --clip X              max global gradient norm; 0 disables (default 1.0)\n"
            "  --seed N              initialisation and data order (default 1234)\n"
            "\n"
            "checkpoints (RUN/checkpoints/step-NNNNNNNN/, parallel HDF5; docs/checkpoint-format.md):\n"
            "  --save-every N        also checkpoint every N steps (always: each epoch end, the last step, and\n"
            "                        on SIGUSR1/SIGTERM to any rank, after which the job exits 0)\n"
            "  --keep-last K         complete checkpoints to keep, older ones removed after a newer one commits\n"
            "                        (default 2; 0 keeps all)\n"
            "  --resume [PATH|auto]  continue from RUN/checkpoints/latest, or from the checkpoint PATH; `auto`\n"
            "                        (requeued jobs): the newest checkpoint that reads, a fresh start only when RUN\n"
            "                        holds no checkpoint at all, else a refusal naming them; the same\n"
            "                        world size continues bit-for-bit, another one reshards (fp32 tolerance);\n"
            "                        the model config, global batch/schedule and dataset must match the checkpoint\n"
            "  --allow-long-seq      train on blocks longer than the model's max_position_embeddings (the\n"
            "                        preflight gate refuses them otherwise: RoPE beyond the trained range)\n"
            "  --allow-new-data      resume on a dataset whose files differ from the checkpoint's (recorded in\n"
            "                        run.json as data_changed_at_step); training continues at the checkpoint's\n"
            "                        step in the new data's order, whose epoch length must be the same\n"
            "  --trace-blocks        write every rank's block ids per step to RUN/ranks/rank-N.blocks (debugging)\n"
            "  --debug-signal-at-step K  rank 0 raises SIGUSR1 during step K (testing the graceful stop)\n"
            "\n"
            "ranks (launch with mpirun -n W zerotrain train ...; without mpirun W = 1):\n"
            "  --no-evenfix          let each rank run its own block count (REPRODUCES the epoch-end deadlock;\n"
            "                        default: every rank stops at the global minimum block count)\n"
            "  --collective-timeout S     a rank stuck longer in one collective reports it and aborts the\n"
            "                        job (default 300)\n"
            "  --first-collective-timeout S  the same until the first step has finished (default 1800)\n"
            "  --save-timeout S      a checkpoint save (HDF5 collective write, its internal barriers included)\n"
            "                        that takes longer is reported and aborted like a stuck collective (1800)\n"
            "  --alive-interval S    seconds between liveness ticks in RUN/ranks/rank-N.alive (default 5)\n"
            "\n"
            "execution and output:\n"
            "  --device D            auto (default: cuda when this build has the GPU engine and every rank\n"
            "                        sees a GPU, else cpu), cuda (one GPU per rank: the node-local rank, bf16\n"
            "                        compute, NCCL collectives) or cpu (fp32 reference)\n"
            "  --attention A         cuda attention: gemm (default: cuBLASLt products + fused causal softmax)\n"
            "                        or cudnn (cuDNN fused flash attention, when built; see docs/cuda.md)\n"
            "  --recompute           cuda: keep only each layer's input and recompute its activations in\n"
            "                        backward (one more forward pass; fits 32B at W=16 on 80 GB GPUs)\n"
            "  --threads N           CPU threads per rank for OpenMP and OpenBLAS (default: OMP_NUM_THREADS, else\n"
            "                        the node's cores divided by the ranks on the node)\n"
            "  --log-every N         print every N steps (default 1; metrics.jsonl gets every step)\n"
            "  --save-dtype T        bf16 (default) or fp32 for RUN/final/model.safetensors\n"
            "  --no-save-final       do not write RUN/final/\n"
            "  --no-tensorboard      do not write TensorBoard event files (default: RUN/tb/, rank 0's\n"
            "                        curves, and RUN/tb/ranks/rank-N/ with each rank's own; open with\n"
            "                        `tensorboard --logdir RUN/tb`)\n"
            "  -h, --help            this text\n");
}

enum {
    O_MODEL = 256, O_INIT, O_DATA, O_RUN, O_OVERWRITE, O_NOVERIFY, O_STEPS, O_EPOCHS, O_MB, O_GA, O_LR, O_SCHED,
    O_WARMUP, O_MINLR, O_WD, O_B1, O_B2, O_EPS, O_CLIP, O_SEED, O_DEVICE, O_ATTN, O_RECOMP, O_THREADS, O_LOG, O_SAVEDT, O_NOSAVE,
    O_NOEVEN, O_CTIMEOUT, O_STIMEOUT, O_FTIMEOUT, O_ALIVE, O_NOPRE, O_SAVEEVERY, O_KEEP, O_RESUME, O_TRACE, O_DEBUGSIG,
    O_NEWDATA, O_LONGSEQ, O_DOCATTN, O_EVALDATA, O_EVALEVERY, O_EVALBATCHES, O_NOTB
};

int zt_cmd_train(int argc, char **argv) {
    static const struct option opts[] = {
        {"model", required_argument, 0, O_MODEL},     {"init", required_argument, 0, O_INIT},
        {"data", required_argument, 0, O_DATA},       {"run-dir", required_argument, 0, O_RUN},
        {"overwrite", no_argument, 0, O_OVERWRITE},   {"no-verify-data", no_argument, 0, O_NOVERIFY},
        {"steps", required_argument, 0, O_STEPS},     {"epochs", required_argument, 0, O_EPOCHS},
        {"micro-batch", required_argument, 0, O_MB},  {"grad-accum", required_argument, 0, O_GA},
        {"lr", required_argument, 0, O_LR},           {"schedule", required_argument, 0, O_SCHED},
        {"warmup", required_argument, 0, O_WARMUP},   {"min-lr-ratio", required_argument, 0, O_MINLR},
        {"weight-decay", required_argument, 0, O_WD}, {"beta1", required_argument, 0, O_B1},
        {"beta2", required_argument, 0, O_B2},        {"adam-eps", required_argument, 0, O_EPS},
        {"clip", required_argument, 0, O_CLIP},       {"seed", required_argument, 0, O_SEED},
        {"device", required_argument, 0, O_DEVICE},   {"attention", required_argument, 0, O_ATTN},
        {"recompute", no_argument, 0, O_RECOMP},   {"threads", required_argument, 0, O_THREADS},
        {"log-every", required_argument, 0, O_LOG},   {"save-dtype", required_argument, 0, O_SAVEDT},
        {"no-save-final", no_argument, 0, O_NOSAVE},  {"help", no_argument, 0, 'h'},
        {"no-evenfix", no_argument, 0, O_NOEVEN},     {"collective-timeout", required_argument, 0, O_CTIMEOUT},
        {"first-collective-timeout", required_argument, 0, O_FTIMEOUT},
        {"save-timeout", required_argument, 0, O_STIMEOUT},
        {"alive-interval", required_argument, 0, O_ALIVE},    {"no-preflight", no_argument, 0, O_NOPRE},
        {"save-every", required_argument, 0, O_SAVEEVERY}, {"keep-last", required_argument, 0, O_KEEP},
        {"resume", optional_argument, 0, O_RESUME},         {"trace-blocks", no_argument, 0, O_TRACE},
        {"debug-signal-at-step", required_argument, 0, O_DEBUGSIG}, {"allow-new-data", no_argument, 0, O_NEWDATA},
        {"allow-long-seq", no_argument, 0, O_LONGSEQ},
        {"doc-attention", required_argument, 0, O_DOCATTN}, {"eval-data", required_argument, 0, O_EVALDATA},
        {"eval-every", required_argument, 0, O_EVALEVERY},  {"eval-batches", required_argument, 0, O_EVALBATCHES},
        {"no-tensorboard", no_argument, 0, O_NOTB},
        {0, 0, 0, 0}};
    zt_train_opts o;
    zt_train_defaults(&o);
    int64_t iv;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        int rc = 0;
        switch (c) {
        case O_MODEL: o.model = optarg; break;
        case O_INIT: o.init = optarg; break;
        case O_DATA: o.data = optarg; break;
        case O_RUN: o.run_dir = optarg; break;
        case O_OVERWRITE: o.overwrite = 1; break;
        case O_NEWDATA: o.allow_new_data = 1; break;
        case O_LONGSEQ: o.allow_long_seq = 1; break;
        case O_NOVERIFY: o.verify_data = 0; break;
        case O_DOCATTN:
            if (!strcmp(optarg, "isolated")) o.doc_attention = ZT_DOC_ATTN_ISOLATED;
            else if (!strcmp(optarg, "full")) o.doc_attention = ZT_DOC_ATTN_FULL;
            else rc = zt_err("--doc-attention: '%s' is not one of isolated, full", optarg);
            break;
        case O_EVALDATA: o.eval_data = optarg; break;
        case O_EVALEVERY: rc = zt_arg_i64("--eval-every", optarg, 0, INT64_MAX, &o.eval_every); break;
        case O_EVALBATCHES: rc = zt_arg_i64("--eval-batches", optarg, 0, INT64_MAX, &o.eval_batches); break;
        case O_STEPS: rc = zt_arg_i64("--steps", optarg, 1, INT64_MAX, &o.steps); break;
        case O_EPOCHS: rc = zt_arg_i64("--epochs", optarg, 1, 1000000, &o.epochs); break;
        case O_MB: rc = zt_arg_i64("--micro-batch", optarg, 1, 1 << 20, &iv); o.micro_batch = (int)iv; break;
        case O_GA: rc = zt_arg_i64("--grad-accum", optarg, 1, 1 << 20, &iv); o.grad_accum = (int)iv; break;
        case O_LR: rc = zt_arg_f64("--lr", optarg, 0, 10, &o.hp.lr); break;
        case O_SCHED:
            if (!strcmp(optarg, "cosine")) o.hp.schedule = ZT_SCHED_COSINE;
            else if (!strcmp(optarg, "constant")) o.hp.schedule = ZT_SCHED_CONSTANT;
            else rc = zt_err("--schedule: '%s' is not one of cosine, constant", optarg);
            break;
        case O_WARMUP: rc = zt_arg_i64("--warmup", optarg, 0, INT64_MAX, &o.hp.warmup); break;
        case O_MINLR: rc = zt_arg_f64("--min-lr-ratio", optarg, 0, 1, &o.hp.min_lr_ratio); break;
        case O_WD: rc = zt_arg_f64("--weight-decay", optarg, 0, 10, &o.hp.weight_decay); break;
        case O_B1: rc = zt_arg_f64("--beta1", optarg, 0, 0.999999, &o.hp.beta1); break;
        case O_B2: rc = zt_arg_f64("--beta2", optarg, 0, 0.999999999, &o.hp.beta2); break;
        case O_EPS: rc = zt_arg_f64("--adam-eps", optarg, 1e-30, 1, &o.hp.eps); break;
        case O_CLIP: rc = zt_arg_f64("--clip", optarg, 0, 1e30, &o.hp.clip); break;
        case O_SEED: rc = zt_arg_i64("--seed", optarg, 0, INT64_MAX, &iv); o.seed = (uint64_t)iv; break;
        case O_DEVICE:
            if (!strcmp(optarg, "auto")) o.device = ZT_DEVICE_AUTO;
            else if (!strcmp(optarg, "cpu")) o.device = ZT_DEVICE_CPU;
            else if (!strcmp(optarg, "cuda")) o.device = ZT_DEVICE_CUDA;
            else rc = zt_err("--device %s: expected auto, cuda or cpu", optarg);
            break;
        case O_RECOMP: o.recompute = 1; break;
        case O_ATTN:
            if (!strcmp(optarg, "gemm")) o.attention_cudnn = 0;
            else if (!strcmp(optarg, "cudnn")) o.attention_cudnn = 1;
            else rc = zt_err("--attention %s: expected gemm or cudnn", optarg);
            break;
        case O_THREADS: rc = zt_arg_i64("--threads", optarg, 1, 4096, &iv); o.threads = (int)iv; break;
        case O_LOG: rc = zt_arg_i64("--log-every", optarg, 0, INT_MAX, &iv); o.log_every = (int)iv; break;
        case O_SAVEDT:
            if (!strcmp(optarg, "bf16")) o.save_dtype = ZT_ST_BF16;
            else if (!strcmp(optarg, "fp32")) o.save_dtype = ZT_ST_F32;
            else rc = zt_err("--save-dtype: '%s' is not one of bf16, fp32", optarg);
            break;
        case O_NOSAVE: o.save_final = 0; break;
        case O_NOTB: o.tensorboard = 0; break;
        case O_NOEVEN: o.evenfix = 0; break;
        case O_STIMEOUT: rc = zt_arg_f64("--save-timeout", optarg, 0.1, 1e7, &o.save_timeout); break;
        case O_CTIMEOUT: rc = zt_arg_f64("--collective-timeout", optarg, 0.1, 1e7, &o.collective_timeout); break;
        case O_NOPRE: o.preflight = 0; break;
        case O_SAVEEVERY: rc = zt_arg_i64("--save-every", optarg, 0, INT64_MAX, &o.save_every); break;
        case O_KEEP: rc = zt_arg_i64("--keep-last", optarg, 0, 1 << 20, &iv); o.keep_last = (int)iv; break;
        case O_RESUME:
            // --resume alone means RUN/checkpoints/latest; --resume PATH (or =PATH) a given checkpoint.
            if (optarg) o.resume = optarg;
            else if (optind < argc && argv[optind][0] != '-') o.resume = argv[optind++];
            else o.resume = "latest";
            break;
        case O_TRACE: o.trace_blocks = 1; break;
        case O_DEBUGSIG: rc = zt_arg_i64("--debug-signal-at-step", optarg, 1, INT64_MAX, &o.debug_signal_at_step); break;
        case O_ALIVE: rc = zt_arg_f64("--alive-interval", optarg, 0.05, 3600, &o.alive_interval); break;
        case O_FTIMEOUT:
            rc = zt_arg_f64("--first-collective-timeout", optarg, 0.1, 1e7, &o.first_collective_timeout);
            break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
        if (rc) {
            fprintf(stderr, "zerotrain train: error: %s\n", zt_errmsg());
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "zerotrain train: error: unexpected argument '%s'\n", argv[optind]);
        return 2;
    }
    if ((o.eval_every || o.eval_batches) && !o.eval_data) {
        fprintf(stderr, "zerotrain train: error: --eval-every and --eval-batches need --eval-data DIR\n");
        return 2;
    }
    if (!o.data || !o.run_dir || (!o.model && !o.init)) {
        fprintf(stderr, "zerotrain train: error: --data, --run-dir and --model (or --init) are required\n\n");
        usage(stderr);
        return 2;
    }
    if (zt_train_run(&o) != 0) {
        fprintf(stderr, "zerotrain train: error: %s\n", zt_errmsg());
        return 1;
    }
    return 0;
}

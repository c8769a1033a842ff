// The dense bf16 peak of the GPUs `zerotrain plan` has presets for (ops/plan.c takes its
// presets' peaks from here), and the match of a device name as the CUDA runtime or NVML
// reports it ("NVIDIA H100 80GB HBM3") to one of them: what a run's MFU is measured against.
// defines: ZT_PEAK_BF16_*, zt_device_peak
#ifndef ZT_DEVICE_PEAK_H
#define ZT_DEVICE_PEAK_H

// Dense (no sparsity) bf16 FLOP/s, datasheet values (docs/plan.md).
#define ZT_PEAK_BF16_B300 2.25e15  // the field report's figure
#define ZT_PEAK_BF16_B200 2.25e15
#define ZT_PEAK_BF16_H200 989e12   // SXM
#define ZT_PEAK_BF16_H100 989e12   // SXM

// 1 when `device` names one of the preset GPUs: its name as a word of the device name, case
// aside ("NVIDIA B200", "NVIDIA H100 80GB HBM3"); the variants with another peak are not
// matched (PCIe and NVL cards, GH200/GB200 superchips). *preset and *peak_flops are set then;
// 0 otherwise (MFU then needs --peak-tflops).
int zt_device_peak(const char *device, const char **preset, double *peak_flops);
#endif

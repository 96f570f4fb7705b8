// Device code that the host's tests also compile as host code (through
// tests/model/cuda_block_emulation.h, which renames it) lives in
// `inline namespace GRPO_KERNEL_BUILD`: the CUDA build's copy and the tests'
// emulated copy of a kernel or helper then have names of their own, so the
// linker never takes one for the other.
#pragma once

#ifndef GRPO_KERNEL_BUILD
#define GRPO_KERNEL_BUILD device_build
#endif

#!/usr/bin/env bash
# On the GPU machine, in one device call of at most 8 minutes: build against the
# machine's own torch wheel (LibTorch 2.x with CUDA), run the `gpu`-labelled
# tests (the model, the engine's CUDA graphs, NCCL), grpo-host train on the GPU,
# the 0.5B generation benchmark against transformers and its kernel profile
# (part 1); with GPU_CHECK_PART=2, on the machine part 1 left warm, the GRPO step benchmark
# against transformers + TRL's loss, the rollout server on the GPU, the weight
# push and the 1.5B and 7B shapes; with GPU_CHECK_PART=3 (a call of its own,
# on a fresh machine or a warm one), the seed's single-GPU shapes: the GRPO
# step at Qwen2.5-7B's shape with LoRA against transformers + peft + TRL's
# loss, full-parameter 7B, and the 7B weight push. Each writes at most 8
# files under $OUT. The machine has a toolchain, nvcc and torch but no network and no
# Debian -dev packages: the libraries come from Debian's packages as one
# relocatable prefix in gpu-carry/ (scripts/gpu-carry.sh makes it here),
# unpacked beside the build, never into /.
#
#   run(command="bash scripts/gpu-check.sh", carry=["gpu-carry"], timeout_s=540, kind="nvidia-h200")
#   run(command="GPU_CHECK_PART=2 GPU_CHECK_BUDGET=240 bash scripts/gpu-check.sh", carry=["gpu-carry"], timeout_s=280)
#   run(command="GPU_CHECK_PART=3 GPU_CHECK_BUDGET=500 bash scripts/gpu-check.sh", carry=["gpu-carry"], timeout_s=540, kind="nvidia-h200")
#
# Each phase has a deadline within GPU_CHECK_BUDGET seconds (default 460), so
# the results of the phases that finished always come back.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"
# Absolute: phases run from the build folder, and the pkg-config wrapper names them.
OUT="$(realpath -m "${OUT:-$ROOT/gpu-check-out}")"
mkdir -p "$OUT"
CARRY="$(realpath -m "${GRPO_CARRY:-$ROOT/gpu-carry}")"
BUILD_DIR="$(realpath -m "${BUILD_DIR:-$ROOT/build-gpu}")"
PREFIX="$BUILD_DIR-prefix"
JOBS="$(nproc)"
START=$(date +%s)
BUDGET="${GPU_CHECK_BUDGET:-460}"
SUMMARY="$OUT/summary.txt"
# Part 1 (the default): the build, the GPU tests, grpo-host train on the GPU
# and the 0.5B generation benchmark. Part 2, on the machine part 1 left warm
# (its build kept): the step benchmark, the rollout server on the GPU, the
# weight push and the 1.5B and 7B shapes. One call each, within the session's
# device time. Part 3 builds what it runs itself (the 7B step and push).
PART="${GPU_CHECK_PART:-1}"
# No network there: a hub lookup by transformers fails at once instead of waiting.
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
: >"$SUMMARY"
note() { echo "gpu-check: $*" | tee -a "$SUMMARY"; }
left() { echo $((BUDGET - ($(date +%s) - START))); }
# phase NAME SECONDS_TO_KEEP_FOR_LATER CMD...: runs CMD with what is left of the
# budget less what the later phases need; records its time and exit status.
phase() {
  local name=$1 keep=$2
  shift 2
  local t0 limit rc
  t0=$(date +%s)
  limit=$(($(left) - keep))
  if ((limit < 5)); then
    note "$name: skipped (no time left)"
    return 1
  fi
  timeout --kill-after=5 "$limit" "$@"
  rc=$?
  note "$name: exit $rc in $(($(date +%s) - t0)) s"
  return $rc
}

# The machine's torch, read before the prefix's libraries are on the search path.
PYTHON="${GRPO_PYTHON:-python3}"
TORCH_PREFIX="$("$PYTHON" -c 'import torch.utils; print(torch.utils.cmake_prefix_path)')"
"$PYTHON" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda,
  torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no device")' | tee "$OUT/device.txt"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader >>"$OUT/device.txt" 2>&1
{ g++ --version | head -1; cmake --version | head -1; nvcc --version | tail -2 | head -1; } >>"$OUT/device.txt" 2>&1

CMAKE_ARGS=(-DCMAKE_BUILD_TYPE=Release "-DTorch_DIR=$TORCH_PREFIX/Torch" "-DGRPO_TORCH_PYTHON=$PYTHON"
            -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_POLICY_VERSION_MINIMUM=3.5)
# A target that fails to build does not stop the others (ninja -k 0, make -k).
KEEP_GOING=(-- -k)
if command -v ninja >/dev/null; then
  CMAKE_ARGS+=(-G Ninja)
  KEEP_GOING=(-- -k 0)
fi
if [ -f "$CARRY/debian-prefix.tar.gz" ]; then
  # Debian's libraries in a prefix, and Debian's pkgconf reading only its .pc
  # files, with the prefix as sysroot; its -I and -L flags are kept even for
  # what it takes for system folders, which are the prefix's here.
  rm -rf "$PREFIX"
  mkdir -p "$PREFIX/bin"
  tar -xzf "$CARRY/debian-prefix.tar.gz" -C "$PREFIX"
  LIBDIR="$PREFIX/usr/lib/x86_64-linux-gnu"
  cat >"$PREFIX/bin/pkg-config" <<EOF
#!/bin/sh
PKG_CONFIG_LIBDIR="$LIBDIR/pkgconfig:$PREFIX/usr/share/pkgconfig" PKG_CONFIG_SYSROOT_DIR="$PREFIX" \\
PKG_CONFIG_ALLOW_SYSTEM_LIBS=1 PKG_CONFIG_ALLOW_SYSTEM_CFLAGS=1 \\
LD_LIBRARY_PATH="$LIBDIR" exec "$PREFIX/usr/bin/pkgconf" "\$@"
EOF
  chmod +x "$PREFIX/bin/pkg-config"
  export PATH="$PREFIX/bin:$PATH"
  export LD_LIBRARY_PATH="$LIBDIR:$PREFIX/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  CMAKE_ARGS+=("-DCMAKE_PREFIX_PATH=$PREFIX/usr" "-DPKG_CONFIG_EXECUTABLE=$PREFIX/bin/pkg-config"
               "-DCMAKE_CXX_FLAGS=-isystem $PREFIX/usr/include -isystem $PREFIX/usr/include/x86_64-linux-gnu")
  note "prefix: $(wc -l <"$CARRY/packages.txt") Debian packages unpacked into $PREFIX"
else
  note "no $CARRY/debian-prefix.tar.gz: using the machine's own libraries (scripts/gpu-carry.sh makes it)"
fi

# The configure and build logs share one file: at most 8 files come back.
if [ "$PART" = 1 ] || [ ! -f "$BUILD_DIR/build.ninja" -a ! -f "$BUILD_DIR/Makefile" ]; then
  # A fresh configure (pkg-config's answers are cached), over the objects a
  # warm machine kept from the last call.
  rm -f "$BUILD_DIR/CMakeCache.txt"
  phase configure 360 cmake -S . -B "$BUILD_DIR" "${CMAKE_ARGS[@]}" >"$OUT/build.log" 2>&1 || {
    tail -40 "$OUT/build.log" >&2
    exit 1
  }
fi

if [ "$PART" != 1 ] && [ -f "$BUILD_DIR/fused-kernels-failed" ]; then
  export GRPO_FUSED_KERNELS=0
  note "the fused CUDA kernels failed their tests (ctest-gpu.log): what follows decodes on LibTorch's ops"
fi
if [ "$PART" = 1 ]; then
  # Each phase's `keep` is what the phases after it are given at the least;
  # what one leaves unused goes to the next. The GPU tests first, so that
  # their result comes back whatever happens later.
  phase build-gpu-tests 300 cmake --build "$BUILD_DIR" -j "$JOBS" --target gpu_test >>"$OUT/build.log" 2>&1
  # --no-tests=error: a gpu_test that failed to build leaves no test labelled gpu.
  (cd "$BUILD_DIR" && phase ctest-gpu 240 ctest -L gpu -E '^TrainGpu[.]' --no-tests=error --output-on-failure \
    >"$OUT/ctest-gpu.log" 2>&1)
  # Fused kernels that disagree with LibTorch's ops would spoil every later
  # figure: then the later phases (and part 2) decode without them, and say so.
  # (ctest lists each test that failed, crashed or timed out as "  N - NAME (WHY)".)
  if grep -qE "^[[:space:]]*[0-9]+ - Gpu(Kernels|Attention)[.]" "$OUT/ctest-gpu.log"; then
    touch "$BUILD_DIR/fused-kernels-failed"
    export GRPO_FUSED_KERNELS=0
    note "the fused CUDA kernels failed their tests (ctest-gpu.log): what follows decodes on LibTorch's ops"
  else
    rm -f "$BUILD_DIR/fused-kernels-failed"
  fi
  # What the later phases run, not the whole tree: train_gpu_test brings
  # grpo-host and every plugin its runs load.
  phase build-run-targets 150 cmake --build "$BUILD_DIR" -j "$JOBS" --target train_gpu_test bench_engine bench_step \
    "${KEEP_GOING[@]}" >>"$OUT/build.log" 2>&1
  (cd "$BUILD_DIR" && phase ctest-gpu-train 50 ctest -R '^TrainGpu[.]' --no-tests=error --output-on-failure \
    >"$OUT/ctest-gpu-train.log" 2>&1)
  # Generation: eager and in slots with CUDA graphs, against transformers'
  # generate on the same GPU and against our own decoding on LibTorch's ops
  # (--unfused), each figure next to the rooflines of this run.
  phase bench-engine 30 "$BUILD_DIR/bin/bench_engine" --shape qwen2.5-0.5b --dtype bfloat16 --device cuda \
    --decode both --hf --unfused --batches 1,16,64,256,512 --new_tokens 64 >"$OUT/bench.txt" 2>&1
  # Where a step's time goes: the kernels of one call per table under
  # LibTorch's profiler (CUPTI), per decoding step, and how busy the GPU was.
  phase kernel-profile 0 "$BUILD_DIR/bin/bench_engine" --shape qwen2.5-0.5b --dtype bfloat16 --device cuda \
    --decode both --kernel_profile 1,64 --new_tokens 64 >"$OUT/kernel-profile.txt" 2>&1
elif [ "$PART" = 3 ]; then
  phase build-part-3 280 cmake --build "$BUILD_DIR" -j "$JOBS" --target grpo_runtime bench_step bench_rollout \
    "${KEEP_GOING[@]}" >>"$OUT/build.log" 2>&1
  # The seed's single-GPU command (ms-swift's guide): Qwen2.5-7B, LoRA rank 8
  # on every linear layer, 1 prompt x G 4, 1,024 new tokens, bf16, beta 0.04,
  # gradient checkpointing; against transformers + peft in the same run.
  phase bench-step-7b-lora 120 "$BUILD_DIR/bin/bench_step" --shape qwen2.5-7b --dtype bfloat16 --device cuda \
    --train_type lora --lora_rank 8 --prompts 1 --generations 4 --new_tokens 1024 --beta 0.04 \
    --gradient_checkpointing true --steps 2 >"$OUT/bench.txt" 2>&1
  # A phase cut by its deadline leaves its 15 GB model behind: the disk holds 64 GiB.
  rm -rf /tmp/grpo_bench_step_*
  # Full-parameter 7B on one GPU (AdamW's moments in bf16 fit an H200 beside the weights and the reference).
  phase bench-step-7b-full 50 "$BUILD_DIR/bin/bench_step" --shape qwen2.5-7b --dtype bfloat16 --device cuda \
    --train_type full --prompts 1 --generations 4 --new_tokens 1024 --beta 0.04 --gradient_checkpointing true \
    --steps 2 --peer false >>"$OUT/bench.txt" 2>&1
  rm -rf /tmp/grpo_bench_step_*
  phase bench-push-7b 0 "$BUILD_DIR/bin/bench_rollout" --preset qwen2.5-7b --dtype bfloat16 --device cuda --push_only \
    >>"$OUT/bench.txt" 2>&1
  rm -rf /tmp/grpo_bench_rollout_qwen2.5-7b
else
  phase build-part-2 200 cmake --build "$BUILD_DIR" -j "$JOBS" --target rollout_test bench_rollout bench_engine \
    "${KEEP_GOING[@]}" >>"$OUT/build.log" 2>&1
  # The GRPO step on the GPU against Hugging Face transformers + TRL's loss, same run.
  phase bench-step 160 "$BUILD_DIR/bin/bench_step" --shape qwen2.5-0.5b --dtype bfloat16 --device cuda --steps 3 \
    >"$OUT/bench.txt" 2>&1
  # The rollout server's limits, cancellation (a client gone, SIGTERM), error
  # answers, weight pushes and trl's / ms-swift's command lines with its
  # engine on the GPU (the same tests, --device cuda; a push from the same GPU
  # goes over Gloo, and says why). --data_parallel_size needs two GPUs.
  (cd "$BUILD_DIR" && phase ctest-rollout-gpu 95 env GRPO_TEST_ROLLOUT_DEVICE=cuda \
    ctest -R '^(RolloutHostile[.]|RolloutWeights[.]|RolloutServer[.]TrlAndSwift)' --no-tests=error --output-on-failure \
    >"$OUT/ctest-rollout-gpu.log" 2>&1)
  # The weight push trainer -> grpo-rollout at Qwen2.5-0.5B's shape, both on
  # the GPU, against a device-to-device copy of the same tensors.
  phase bench-push 50 "$BUILD_DIR/bin/bench_rollout" --preset qwen2.5-0.5b --device cuda --push_only \
    >>"$OUT/bench.txt" 2>&1
  # The larger shapes, as far as the budget goes (each phase's lines come back).
  phase bench-engine-1.5b 25 "$BUILD_DIR/bin/bench_engine" --shape qwen2.5-1.5b --dtype bfloat16 --device cuda \
    --decode slots --hf --batches 1,64,256 --new_tokens 64 --skip_passes >>"$OUT/bench.txt" 2>&1
  phase bench-engine-7b 0 "$BUILD_DIR/bin/bench_engine" --shape qwen2.5-7b --dtype bfloat16 --device cuda \
    --decode slots --hf --batches 1,64 --new_tokens 64 --skip_passes >>"$OUT/bench.txt" 2>&1
fi
# The CPU suite is CI's (scripts/test.sh on every change); it is not run here.

# Logs are cut to what reads in a reply: the failures and the closing lines.
for f in build.log ctest.log; do
  if [ -f "$OUT/$f" ]; then
    { grep -E "FAILED|error:|Error" "$OUT/$f" | head -60; echo ...; tail -60 "$OUT/$f"; } >"$OUT/$f.cut"
    mv "$OUT/$f.cut" "$OUT/$f"
  fi
done
grep -hE "tests passed|tests failed" "$OUT"/ctest*.log | tee -a "$SUMMARY"
# A test skips without a usable GPU (a driver too old for this CUDA): that is no pass.
skipped=$(cat "$OUT"/ctest*.log 2>/dev/null | grep -c "(Skipped)" || true)
[ "$skipped" = 0 ] || note "$skipped test(s) SKIPPED: no usable GPU for them (device.txt says what torch saw)"
note "total $(($(date +%s) - START)) s"

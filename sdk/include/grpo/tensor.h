/* Tensor views in the DLPack DLTensor layout.
 *
 * Rationale: plugin authors must need nothing beyond this SDK, so the SDK
 * declares the layout itself under its own names. The layout is identical to
 * DLPack's DLTensor/DLDevice/DLDataType (same in DLPack 0.6 and 1.x), so a
 * pointer to one may be cast to the other; a test checks the offsets against
 * dlpack.h. LibTorch converts with at::fromDLPack / at::toDLPack. */
#ifndef GRPO_TENSOR_H
#define GRPO_TENSOR_H

#include <stdint.h>

#include "grpo/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Device types: the DLPack DLDeviceType values. */
typedef int32_t grpo_device_type;
#define GRPO_DEVICE_CPU 1
#define GRPO_DEVICE_CUDA 2
#define GRPO_DEVICE_CUDA_HOST 3

typedef struct grpo_dl_device {
  grpo_device_type device_type;
  int32_t device_id;
} grpo_dl_device;

/* Type codes: the DLPack DLDataTypeCode values. */
#define GRPO_DTYPE_INT 0
#define GRPO_DTYPE_UINT 1
#define GRPO_DTYPE_FLOAT 2
#define GRPO_DTYPE_BFLOAT 4
#define GRPO_DTYPE_BOOL 6

typedef struct grpo_dl_dtype {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
} grpo_dl_dtype;

/* Layout-identical to DLTensor. `strides` may be NULL (compact row-major). */
typedef struct grpo_dl_tensor {
  void* data;
  grpo_dl_device device;
  int32_t ndim;
  grpo_dl_dtype dtype;
  int64_t* shape;
  int64_t* strides;
  uint64_t byte_offset;
} grpo_dl_tensor;

/* A named view, e.g. a model parameter "model.layers.0.mlp.up_proj.weight".
 * Fixed layout (never grows). */
typedef struct grpo_named_tensor {
  grpo_str name;
  grpo_dl_tensor tensor;
} grpo_named_tensor;

#ifdef __cplusplus
}
#endif

#endif /* GRPO_TENSOR_H */

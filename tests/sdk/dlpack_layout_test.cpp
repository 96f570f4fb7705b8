// The SDK's tensor view is layout-identical to DLPack's DLTensor, so
// at::fromDLPack and any DLPack consumer can read it through a cast.
#include <cstddef>

#include <dlpack/dlpack.h>
#include <grpo/tensor.h>
#include <gtest/gtest.h>

#define SAME_FIELD(A, B, fa, fb)                        \
  static_assert(offsetof(A, fa) == offsetof(B, fb), #fa); \
  static_assert(sizeof(((A*)0)->fa) == sizeof(((B*)0)->fb), #fa)

SAME_FIELD(grpo_dl_tensor, DLTensor, data, data);
SAME_FIELD(grpo_dl_tensor, DLTensor, device, device);
SAME_FIELD(grpo_dl_tensor, DLTensor, ndim, ndim);
SAME_FIELD(grpo_dl_tensor, DLTensor, dtype, dtype);
SAME_FIELD(grpo_dl_tensor, DLTensor, shape, shape);
SAME_FIELD(grpo_dl_tensor, DLTensor, strides, strides);
SAME_FIELD(grpo_dl_tensor, DLTensor, byte_offset, byte_offset);
SAME_FIELD(grpo_dl_device, DLDevice, device_type, device_type);
SAME_FIELD(grpo_dl_device, DLDevice, device_id, device_id);
SAME_FIELD(grpo_dl_dtype, DLDataType, code, code);
SAME_FIELD(grpo_dl_dtype, DLDataType, bits, bits);
SAME_FIELD(grpo_dl_dtype, DLDataType, lanes, lanes);
static_assert(sizeof(grpo_dl_tensor) == sizeof(DLTensor));

TEST(DLPackLayout, ConstantsMatchDLPack) {
  EXPECT_EQ(GRPO_DEVICE_CPU, kDLCPU);
  EXPECT_EQ(GRPO_DEVICE_CUDA, kDLCUDA);
  EXPECT_EQ(GRPO_DTYPE_FLOAT, kDLFloat);
  EXPECT_EQ(GRPO_DTYPE_BFLOAT, kDLBfloat);
  EXPECT_EQ(GRPO_DTYPE_INT, kDLInt);
}

TEST(DLPackLayout, ViewReadsThroughCast) {
  float data[6] = {0, 1, 2, 3, 4, 5};
  int64_t shape[2] = {2, 3};
  grpo_dl_tensor t{data, {GRPO_DEVICE_CPU, 0}, 2, {GRPO_DTYPE_FLOAT, 32, 1}, shape, nullptr, 0};
  const auto* dl = reinterpret_cast<const DLTensor*>(&t);
  EXPECT_EQ(dl->ndim, 2);
  EXPECT_EQ(dl->shape[1], 3);
  EXPECT_EQ(static_cast<float*>(dl->data)[5], 5.0f);
}

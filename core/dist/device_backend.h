// What carries the device tensors of ranks on GPUs (--ddp_backend, Hugging
// Face's flag): NCCL where every rank has a GPU of its own (Auto), or as
// asked. Host-side traffic (bytes, barriers) is always Gloo's.
#pragma once

namespace grpo::dist {

enum class DeviceBackend { Auto, Nccl, Gloo };

}  // namespace grpo::dist

#include "model/fused_scope.h"

namespace grpo::model {

namespace {
thread_local bool t_fused = false;
}  // namespace

FusedScope::FusedScope() : previous_(t_fused) { t_fused = true; }
FusedScope::~FusedScope() { t_fused = previous_; }
bool FusedScope::open() { return t_fused; }

}  // namespace grpo::model

// Large collectives with their staging copies in chunks beside the transfer.
//
// A collective's data moves device -> pinned, over Gloo, pinned -> device.
// Run one after another, the two copies add to the transfer's time; here the
// transfer stages its own data (orCollectiveCopy, recorded on the group's
// copy stream) a chunk at a time while the chunks staged before are on the
// wire, as NCCL pipelines through its buffers. all_reduce runs a Gloo
// all_reduce per chunk; all_gather and reduce_scatter send each peer its
// chunks directly as Gloo point-to-point messages (Gloo's own
// reduce_scatter is an all_reduce, which moves n times the data).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include <c10/core/ScalarType.h>
#include <openreg/runtime.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>

namespace openreg::distributed {

// The collectives that can run as a pipeline.
enum class PipelineShape : uint8_t { None, AllReduce, AllGather, ReduceScatter };

struct PipelineSpec {
  PipelineShape shape = PipelineShape::None;
  c10d::ReduceOp op;     // the host's op: AVG arrives as SUM with `average` set
  bool average = false;  // divide the reduced values by the group size
  at::ScalarType dtype = at::kFloat;
};

// One slot of the collective on both sides of the staging copies, in the
// request's slot order. Slot 0 is this rank's own piece (all_reduce's buffer,
// all_gather's input, reduce_scatter's output); the others hold one piece per
// rank, either as one tensor in rank order or one tensor each.
struct StagedSlot {
  void* device;
  void* pinned;
  int64_t bytes;
};

// Runs the collective on the calling executor thread (inside the transfer's
// func); point-to-point messages carry `tag`. `checked` runs once the first
// chunk is staged in, before anything is posted to Gloo: the first
// exchange's wait and size check, which throw on disagreement. Throws on
// any failure (Gloo's, or a copy's). All ranks derive the same chunks from
// the agreed sizes, so their messages match. `host` and `copyStream` are
// borrowed for the call; the slots' memory must outlive it.
void runPipelined(c10d::Backend& host, const PipelineSpec& spec, const std::vector<StagedSlot>& slots,
                  orStream_t copyStream, int tag, const std::function<void()>& checked);

// Host-side reductions, as Gloo's (SUM of bools is OR, PRODUCT AND):
// out op= x; out = a op b; an average's division (integers truncate).
void reduceInto(at::Tensor& out, const at::Tensor& x, const c10d::ReduceOp& op);
void combineInto(at::Tensor& out, const at::Tensor& a, const at::Tensor& b, const c10d::ReduceOp& op);
void divideBy(at::Tensor& values, int divisor);

}  // namespace openreg::distributed

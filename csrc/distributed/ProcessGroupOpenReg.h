// orccl: the c10d backend for openreg devices.
//
// Every collective runs on a communication stream of its device (one per
// group and device, high priority, from the device's pool): the stream waits
// for the caller's current stream, copies the inputs to pinned host memory,
// runs the transfer through a Gloo group built for the same store (the
// `host` backend, made in Python), and copies the results back. The host
// returns once this is queued. The transfer is one orLaunchCollective, so
// profilers see one COMMUNICATION event per collective, between its staging
// copies. Each call opens torch's record_param_comms with NCCL's arguments.
#pragma once

#include <array>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <c10/core/Stream.h>
#include <openreg/runtime.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>

#include "distributed/Pipeline.h"
#include "distributed/Work.h"

namespace openreg::distributed {

struct TransferBody;  // a queued transfer's state (ProcessGroupOpenReg.cpp)

class ProcessGroupOpenReg : public c10d::Backend {
 public:
  static constexpr const char* kName = "orccl";

  // host: a Gloo backend over the same ranks; globalRanks: this group's
  // ranks in the default group (empty means 0..size-1).
  ProcessGroupOpenReg(c10::intrusive_ptr<c10d::Backend> host, int rank, int size, std::vector<int64_t> globalRanks,
                      std::chrono::milliseconds timeout);

  const std::string getBackendName() const override { return kName; }
  // Between start and end, calls are held and then queued as one transfer
  // whose Gloo operations run concurrently (batch_isend_irecv needs this:
  // both ranks may post their sends first).
  bool supportsCoalescing() const override { return true; }
  void startCoalescing() override;
  c10::intrusive_ptr<c10d::Work> endCoalescing() override;

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                     const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                 std::vector<at::Tensor>& inputs,
                                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                      const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                 std::vector<at::Tensor>& inputs,
                                                                 const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& outputSplits, std::vector<int64_t>& inputSplits,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dstRank, int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int srcRank, int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;

  // torch's _set_pg_timeout and ProcessGroup._set_default_timeout: the bound
  // of later calls, and of the Gloo group they run on. Work already queued
  // keeps the bound it started with.
  void setTimeout(std::chrono::milliseconds timeout) override;
  std::chrono::milliseconds timeout() const;

  void setSequenceNumberForGroup() override {}
  uint64_t getSequenceNumberForGroup() override;

  // The communication stream of `device` (for tests and tools).
  c10::Stream communicationStream(c10::DeviceIndex device);

  // One device tensor that a collective reads (staged to the host before the
  // transfer) and/or writes (staged back after it).
  struct Slot {
    at::Tensor tensor;
    bool read;
    bool write;
  };
  // Starts the Gloo side on host views of the slots, in slot order.
  using Start = std::function<c10::intrusive_ptr<c10d::Work>(c10d::Backend& host, std::vector<at::Tensor>& views)>;
  // Runs on the same views once the Gloo side finished (e.g. AVG's division).
  using After = std::function<void(std::vector<at::Tensor>& views)>;
  // Computes the outputs, on the same views, from every rank's inputs as
  // carried by the first exchange: payloads[r] holds rank r's staged inputs
  // (the slots it reads, in slot order) as bytes.
  using Combine = std::function<void(const std::vector<at::Tensor>& payloads, std::vector<at::Tensor>& views)>;
  // What every rank of a collective (or both sides of a transfer) must
  // agree on. Checked by the first exchange, before Gloo sees the data: Gloo
  // aborts the process when sizes differ, so a mismatch must never reach it.
  struct Agreement {
    bool check = false;
    int64_t collective = 0;  // a code for the collective's name
    int64_t dtype = 0;
    int64_t count = 0;
    int peer = -1;       // point-to-point: exchange with this rank only
    bool sends = false;  // point-to-point: this side sends
    int tag = 0;
  };
  // One Gloo operation over slots [first, first + count) of a request.
  struct Part {
    Start start;
    After after;
    size_t first;
    size_t count;
    Agreement agreement;
    std::string collective;
    Combine combine;        // set where small inputs can ride in the first exchange
    PipelineSpec pipeline;  // set where large messages can stage in chunks
  };

  // Everything one collective needs; built by each operation.
  struct Request {
    c10d::OpType opType;
    std::string collective;  // record_param_comms "Collective name"
    std::string eventStem;   // "AllReduce_Sum": event openregComm_<stem>_<dtype>
    std::vector<Slot> slots;
    std::vector<at::Tensor> outputs;  // what the future and result() hold
    at::ScalarType dtype = at::kFloat;
    int64_t inNelems = 0;
    int64_t outNelems = 0;
    std::vector<int64_t> inSplits;
    std::vector<int64_t> outSplits;
    int peer = -1;  // group rank, point-to-point only
    bool blocking = false;
    int64_t matchCount = -1;  // elements all ranks must agree on; -1: nothing to check
    int tag = 0;              // point-to-point
    c10d::ReduceOp reduceOp;  // reducing collectives: as asked (PREMUL_SUM premultiplies the inputs in launch)
    Start start;
    After after;
    Combine combine;
    PipelineSpec pipeline;
    std::vector<Part> parts;  // filled by launch: one, or several when coalesced
  };

  // How large the payload of a transfer's first-exchange blocks is: as large
  // as the largest of the last few messages that could ride in one (up to
  // 1 MiB between two ranks, 256 KiB in larger groups), so a training loop's buckets or a benchmark's repeated calls
  // move in one exchange. All ranks derive it from what they agreed on, in the same order, so their blocks always
  // match. One per group and device: its transfers run in stream order.
  class BlockSizer {
   public:
    int64_t payloadBytes() const;
    void agreed(int64_t bytes);  // a checked part's inputs (0: never rides)

   private:
    mutable std::mutex mutex_;
    std::array<int64_t, 8> recent_{};
    size_t next_ = 0;
  };

  // The group's first failure: later calls, and transfers already queued,
  // fail with it instead of talking to peers that are out of step.
  class Health {
   public:
    void record(const std::string& message);
    std::string failure() const;  // "" while healthy

   private:
    mutable std::mutex mutex_;
    std::string failure_;
  };

 private:
  // send and recv: one tensor, to or from one other rank of the group.
  Request pointToPoint(c10d::OpType type, std::vector<at::Tensor>& tensors, int peer, int tag) const;
  c10::intrusive_ptr<c10d::Work> launch(Request& request);
  c10::intrusive_ptr<c10d::Work> hold(Request& request, c10::DeviceIndex device);
  c10::intrusive_ptr<c10d::Work> record(Request& request, c10::DeviceIndex device, bool p2p);
  c10::intrusive_ptr<c10d::Work> enqueue(Request& request, c10::DeviceIndex device, uint64_t sequence);
  void launchTransfer(const Request& request, uint64_t sequence, std::unique_ptr<TransferBody> body, orStream_t stream);
  c10::DeviceIndex checkTensors(const Request& request);
  std::shared_ptr<BlockSizer> blockSizer(c10::DeviceIndex device);
  std::shared_ptr<orStream_st> copyStream(c10::DeviceIndex device);
  bool pipelines(const Request& request) const;
  void throwIfFailedBefore();
  std::string describe(const Request& request, uint64_t sequence) const;

  c10::intrusive_ptr<c10d::Backend> host_;
  std::vector<int64_t> globalRanks_;
  std::chrono::milliseconds timeout_;
  mutable std::mutex mutex_;
  std::map<c10::DeviceIndex, c10::Stream> streams_;
  std::map<c10::DeviceIndex, std::shared_ptr<BlockSizer>> sizers_;
  // The rows of pipelined transfers' staging copies (orCollectiveCopy).
  std::map<c10::DeviceIndex, std::shared_ptr<orStream_st>> copyStreams_;
  std::optional<c10::DeviceIndex> firstDevice_;  // without a bound device: the device of the first call
  uint64_t collectiveSeq_ = 0;
  uint64_t p2pSeq_ = 0;
  std::shared_ptr<Health> health_ = std::make_shared<Health>();
  // Coalescing: the held requests and the futures handed out for them.
  bool coalescing_ = false;
  std::vector<Request> held_;
  std::vector<c10::intrusive_ptr<c10::ivalue::Future>> heldFutures_;
  std::optional<c10::DeviceIndex> heldDevice_;
};

}  // namespace openreg::distributed

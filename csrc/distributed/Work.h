// The Work of an orccl collective: NCCL's semantics on an openreg stream.
//
// The collective runs on the group's communication stream. wait() makes the
// caller's current stream wait for its end (the host does not block, except
// for barrier, which is blocking as NCCL's is). The future is completed at
// launch with the outputs, recorded on the communication stream, so waiting
// on it or chaining `then` orders the caller's streams after the collective,
// as with a CUDA future. A failure is reported by wait(), by the group's
// next call and by the next device synchronisation.
#pragma once

#include <condition_variable>
#include <exception>
#include <mutex>
#include <string>
#include <vector>

#include <ATen/core/ivalue.h>
#include <c10/core/Event.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

namespace openreg::distributed {

// What the executor thread reports back about one collective.
class CollectiveOutcome {
 public:
  void succeed();
  void fail(std::exception_ptr error);
  bool done() const;
  // Throws the failure, if any. Does not wait.
  void rethrowIfFailed() const;
  std::exception_ptr error() const;
  // Blocks until done; false on timeout.
  bool waitDone(std::chrono::milliseconds timeout);

 private:
  mutable std::mutex mutex_;
  std::condition_variable doneChanged_;
  bool done_ = false;
  std::exception_ptr error_;
};

class WorkOpenReg : public c10d::Work {
 public:
  WorkOpenReg(int rank, c10d::OpType opType, uint64_t sequence, std::vector<at::Tensor> outputs,
              std::shared_ptr<CollectiveOutcome> outcome, c10::Event end,
              c10::intrusive_ptr<c10::ivalue::Future> future, bool blockingWait, std::chrono::milliseconds timeout,
              std::string description);

  bool isCompleted() override;
  bool isSuccess() const override;
  std::exception_ptr exception() const override;
  std::vector<at::Tensor> result() override;
  bool wait(std::chrono::milliseconds timeout) override;
  void synchronize() override;
  void blockCurrentStream() override;
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;
  uint64_t getSequencenumber() const override { return sequence_; }

 private:
  const uint64_t sequence_;
  std::vector<at::Tensor> outputs_;
  std::shared_ptr<CollectiveOutcome> outcome_;
  c10::Event end_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  const bool blockingWait_;
  const std::chrono::milliseconds timeout_;
  const std::string description_;  // names the collective, group, seq and peers
};

}  // namespace openreg::distributed

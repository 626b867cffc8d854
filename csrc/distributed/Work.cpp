#include "distributed/Work.h"

#include <c10/core/impl/VirtualGuardImpl.h>

namespace openreg::distributed {

void CollectiveOutcome::succeed() {
  std::lock_guard lock(mutex_);
  done_ = true;
  doneChanged_.notify_all();
}

void CollectiveOutcome::fail(std::exception_ptr error) {
  std::lock_guard lock(mutex_);
  done_ = true;
  error_ = std::move(error);
  doneChanged_.notify_all();
}

bool CollectiveOutcome::done() const {
  std::lock_guard lock(mutex_);
  return done_;
}

std::exception_ptr CollectiveOutcome::error() const {
  std::lock_guard lock(mutex_);
  return error_;
}

void CollectiveOutcome::rethrowIfFailed() const {
  if (std::exception_ptr error = this->error()) std::rethrow_exception(error);
}

bool CollectiveOutcome::waitDone(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  return doneChanged_.wait_for(lock, timeout, [this] { return done_; });
}

WorkOpenReg::WorkOpenReg(int rank, c10d::OpType opType, uint64_t sequence, std::vector<at::Tensor> outputs,
                         std::shared_ptr<CollectiveOutcome> outcome, c10::Event end,
                         c10::intrusive_ptr<c10::ivalue::Future> future, bool blockingWait,
                         std::chrono::milliseconds timeout, std::string description)
    : c10d::Work(rank, opType),
      sequence_(sequence),
      outputs_(std::move(outputs)),
      outcome_(std::move(outcome)),
      end_(std::move(end)),
      future_(std::move(future)),
      blockingWait_(blockingWait),
      timeout_(timeout),
      description_(std::move(description)) {}

bool WorkOpenReg::isCompleted() {
  // Done means the data is back on the device, not only that peers answered.
  return outcome_->done() && (outcome_->error() != nullptr || end_.query());
}

bool WorkOpenReg::isSuccess() const { return outcome_->done() && outcome_->error() == nullptr; }

std::exception_ptr WorkOpenReg::exception() const { return outcome_->error(); }

std::vector<at::Tensor> WorkOpenReg::result() { return outputs_; }

void WorkOpenReg::blockCurrentStream() {
  c10::impl::VirtualGuardImpl guard(end_.device_type());
  end_.block(guard.getStream(end_.device()));
}

bool WorkOpenReg::wait(std::chrono::milliseconds timeout) {
  outcome_->rethrowIfFailed();
  if (blockingWait_) {
    // Work queued ahead may itself wait up to the group's timeout and then
    // fail with the reason: give it the time to, before reporting a timeout.
    const auto limit = timeout == kNoTimeout ? 2 * timeout_ + std::chrono::seconds(1) : timeout;
    TORCH_CHECK_WITH(DistBackendError, outcome_->waitDone(limit), description_, " did not finish within ",
                     limit.count(), " ms");
    outcome_->rethrowIfFailed();
    end_.synchronize();
    return true;
  }
  blockCurrentStream();
  return true;
}

void WorkOpenReg::synchronize() { wait(kNoTimeout); }

c10::intrusive_ptr<c10::ivalue::Future> WorkOpenReg::getFuture() { return future_; }

}  // namespace openreg::distributed

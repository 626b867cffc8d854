// Test-only device kernels, in the `openreg` operator namespace:
//   torch.ops.openreg._fail_kernel(t, message)
//       queues a kernel "test_fail_kernel" that fails with `message`; the
//       failure surfaces at the next synchronization (item(), .cpu(),
//       synchronize()), as a RuntimeError naming the kernel.
//   torch.ops.openreg._wait_gate(t, gate, timeout_s)
//       queues a kernel "test_wait_gate" that blocks its stream until
//       torch_openreg._C._open_gate(gate) is called (or fails after
//       timeout_s), so tests can prove asynchrony and stream ordering
//       without relying on timing.
//   torch.ops.openreg._kernel_threads(out)
//       queues a kernel "test_kernel_threads" that writes the intra-op
//       threads ATen would use inside a kernel body (at::get_num_threads())
//       to out[0], an int64 openreg tensor.
// The first two return `t` unchanged and only serve to occupy the stream of
// t's device.
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>

#include <ATen/Parallel.h>
#include <torch/library.h>

#include "backend/OpRegistry.h"
#include "backend/TestGates.h"
#include "backend/aten/DeviceKernel.h"

namespace openreg::backend {

namespace {

struct Gates {
  std::mutex mutex;
  std::condition_variable changed;
  std::map<int64_t, bool> open;
  std::map<int64_t, int> waiting;  // kernels blocked on each gate
};

Gates& gates() {
  static auto* instance = new Gates();
  return *instance;
}

at::Tensor failKernel(const at::Tensor& self, c10::string_view message) {
  TORCH_CHECK(self.is_privateuseone(), "_fail_kernel expects an openreg tensor");
  c10::DeviceGuard guard(self.device());
  launchKernel(streamFor(self), "test_fail_kernel", LaunchShape{},
               [text = std::string(message)]() { throw std::runtime_error(text); });
  return self;
}

at::Tensor waitGate(const at::Tensor& self, int64_t gate, double timeoutS) {
  TORCH_CHECK(self.is_privateuseone(), "_wait_gate expects an openreg tensor");
  c10::DeviceGuard guard(self.device());
  {
    std::lock_guard<std::mutex> lock(gates().mutex);
    gates().open.emplace(gate, false);
  }
  launchKernel(streamFor(self), "test_wait_gate", LaunchShape{}, [gate, timeoutS]() {
    Gates& g = gates();
    std::unique_lock<std::mutex> lock(g.mutex);
    ++g.waiting[gate];
    const bool opened = g.changed.wait_for(lock, std::chrono::duration<double>(timeoutS), [&] { return g.open[gate]; });
    if (--g.waiting[gate] == 0) g.waiting.erase(gate);
    g.open.erase(gate);
    if (!opened) throw std::runtime_error("gate " + std::to_string(gate) + " was not opened in time");
  });
  return self;
}

at::Tensor& kernelThreads(at::Tensor& out) {
  TORCH_CHECK(out.is_privateuseone() && out.scalar_type() == at::kLong && out.numel() >= 1,
              "_kernel_threads expects an int64 openreg tensor with an element");
  c10::DeviceGuard guard(out.device());
  auto* first = out.data_ptr<int64_t>();
  launchKernel(streamFor(out), "test_kernel_threads", LaunchShape{}, [first]() { *first = at::get_num_threads(); });
  return out;
}

}  // namespace

void openGate(int64_t gate) {
  Gates& g = gates();
  {
    std::lock_guard<std::mutex> lock(g.mutex);
    g.open[gate] = true;
  }
  g.changed.notify_all();
}

bool gateWaiting(int64_t gate) {
  Gates& g = gates();
  std::lock_guard<std::mutex> lock(g.mutex);
  return g.waiting.count(gate) > 0;
}

TORCH_LIBRARY(openreg, m) {
  m.def("_fail_kernel(Tensor(a) self, str message) -> Tensor(a)");
  m.def("_wait_gate(Tensor(a) self, int gate, float timeout_s=60.0) -> Tensor(a)");
  m.def("_kernel_threads(Tensor(a!) out) -> Tensor(a!)");
}

TORCH_LIBRARY_IMPL(openreg, PrivateUse1, m) {
  m.impl("_fail_kernel", TORCH_FN(failKernel));
  m.impl("_wait_gate", TORCH_FN(waitGate));
  recordOpPath("openreg::_fail_kernel", OpPath::Device, "test_fail_kernel");
  m.impl("_kernel_threads", TORCH_FN(kernelThreads));
  recordOpPath("openreg::_wait_gate", OpPath::Device, "test_wait_gate");
  recordOpPath("openreg::_kernel_threads", OpPath::Device, "test_kernel_threads");
}

}  // namespace openreg::backend

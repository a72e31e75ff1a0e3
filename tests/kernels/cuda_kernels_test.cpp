// cuda_kernels_test.cpp: every CUDA kernel of kernels/cuda against its CPU twin in
// kernels/cpu (llm.c's validate_result). Built and registered only with MEMOPT_CUDA;
// skips itself when no CUDA device is visible (as on CI).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include <cuda_runtime.h>

#include "kernels/bias_gelu.h"
#include "kernels/cpu/reference.h"
#include "kernels/cross_entropy.h"
#include "kernels/dropout.h"
#include "kernels/pack.h"

namespace memopt::kernels {
namespace {

class CudaKernels : public ::testing::Test {
 protected:
  void SetUp() override {
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) GTEST_SKIP() << "no CUDA device visible";
  }
};

template <typename T>
struct DeviceBuffer {
  T* ptr = nullptr;
  size_t n;
  explicit DeviceBuffer(size_t n_) : n(n_) { EXPECT_EQ(cudaMalloc(reinterpret_cast<void**>(&ptr), n * sizeof(T) + 1), cudaSuccess); }
  DeviceBuffer(const std::vector<T>& host) : DeviceBuffer(host.size()) {
    EXPECT_EQ(cudaMemcpy(ptr, host.data(), n * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
  }
  std::vector<T> host() const {
    std::vector<T> out(n);
    EXPECT_EQ(cudaMemcpy(out.data(), ptr, n * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
    return out;
  }
  ~DeviceBuffer() { cudaFree(ptr); }
};

std::vector<float> random_floats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 2.0f);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// Same counter mapping: the GPU's output equals the CPU's bit for bit.
TEST_F(CudaKernels, DropoutEqualsCpuBitForBit) {
  for (uint64_t offset : {0ull, 3ull, 1ull << 33}) {
    const int64_t n = 100003;
    const std::vector<float> x = random_floats(n, 1);
    std::vector<float> cpu_y(n), cpu_dx(n);
    cpu::dropout_forward(x.data(), cpu_y.data(), n, 0.1f, {42, offset});
    cpu::dropout_backward(x.data(), cpu_dx.data(), n, 0.1f, {42, offset});
    DeviceBuffer<float> dx_in(x), y(n), dx(n);
    cuda::dropout_forward(dx_in.ptr, y.ptr, n, 0.1f, {42, offset}, nullptr);
    cuda::dropout_backward(dx_in.ptr, dx.ptr, n, 0.1f, {42, offset}, nullptr);
    EXPECT_EQ(y.host(), cpu_y);
    EXPECT_EQ(dx.host(), cpu_dx);
  }
}

// Against the double reference, with bias_gelu_test.cpp's bounds for the CPU twin:
// the device's tanhf and the fused multiply-adds nvcc emits stay within a few ulp of
// it as the host's do (rtol 1e-5, atol 1e-6, times |dy| for the gradient). Comparing
// the two float kernels with each other would need twice that: each may sit at the
// bound on the other side. db sums 1000 rows in float (125 per lane, then a tree of
// 8): its bound is the sum of theirs plus float summation's, (rows / 8 + 3) eps
// times the sum of the magnitudes.
TEST_F(CudaKernels, BiasGeluMatchesTheDoubleReference) {
  const int64_t rows = 1000, cols = 96;
  const std::vector<float> h = random_floats(rows * cols, 2), b = random_floats(cols, 3), dy = random_floats(rows * cols, 4);
  DeviceBuffer<float> dh_in(h), db_in(b), ddy(dy), dyo(h.size()), ddh(h.size()), ddb(b.size());
  cuda::bias_gelu_forward(dh_in.ptr, db_in.ptr, dyo.ptr, rows, cols, nullptr);
  cuda::bias_gelu_backward(ddy.ptr, dh_in.ptr, db_in.ptr, ddh.ptr, ddb.ptr, rows, cols, nullptr);
  const auto gy = dyo.host(), gdh = ddh.host(), gdb = ddb.host();
  constexpr double kAtol = 1e-6, kRtol = 1e-5;
  std::vector<double> ref_db(static_cast<size_t>(cols), 0.0), db_bound(static_cast<size_t>(cols), 0.0),
      sum_abs(static_cast<size_t>(cols), 0.0);
  for (size_t i = 0; i < h.size(); ++i) {
    const size_t c = i % static_cast<size_t>(cols);
    const double z = static_cast<double>(h[i]) + b[c];
    const double ref_y = reference::gelu_tanh(z), ref_dh = dy[i] * reference::gelu_tanh_grad(z);
    ASSERT_LE(std::abs(gy[i] - ref_y), kAtol + kRtol * std::abs(ref_y)) << i;
    const double tol = kAtol * std::abs(dy[i]) + kRtol * std::abs(ref_dh);
    ASSERT_LE(std::abs(gdh[i] - ref_dh), tol) << i;
    ref_db[c] += ref_dh;
    db_bound[c] += tol;
    sum_abs[c] += std::abs(ref_dh);
  }
  const double summation = (static_cast<double>(rows) / 8 + 3) * 6e-8;
  for (size_t c = 0; c < gdb.size(); ++c)
    ASSERT_LE(std::abs(gdb[c] - ref_db[c]), db_bound[c] + summation * sum_abs[c]) << c;
}

TEST_F(CudaKernels, PackEqualsCpuInBothFormats) {
  const std::vector<float> a = random_floats(1001, 5), b = random_floats(77, 6);
  const std::vector<PackItem> items = {{1001, 4, true}, {77, 4, true}};
  for (PackFormat f : {PackFormat::Exact, PackFormat::Bf16Lossy}) {
    const PackLayout l = pack_layout(items, f);
    std::vector<std::byte> cpu_buf(static_cast<size_t>(l.total_bytes));
    cpu::pack(l, std::vector<const void*>{a.data(), b.data()}, cpu_buf.data());
    DeviceBuffer<float> da(a), dbf(b);
    DeviceBuffer<std::byte> buf(static_cast<size_t>(l.total_bytes));
    cuda::pack(l, std::vector<const void*>{da.ptr, dbf.ptr}, buf.ptr, nullptr);
    EXPECT_EQ(buf.host(), cpu_buf);
    DeviceBuffer<float> ua(a.size()), ub(b.size());
    cuda::unpack(l, buf.ptr, std::vector<void*>{ua.ptr, ub.ptr}, nullptr);
    std::vector<float> ca(a.size()), cb(b.size());
    cpu::unpack(l, cpu_buf.data(), std::vector<void*>{ca.data(), cb.data()});
    EXPECT_EQ(ua.host(), ca);
    EXPECT_EQ(ub.host(), cb);
  }
}

TEST_F(CudaKernels, CrossEntropyBlocksEqualCpu) {
  const int64_t rows = 5, vocab = 700, block = 300;
  const std::vector<float> logits = random_floats(static_cast<size_t>(rows * vocab), 7);
  const std::vector<int64_t> targets = {3, -100, 699, 0, 350};
  std::vector<float> m(rows, -INFINITY), s(rows, 0.0f), t(rows, 0.0f), lse(rows), loss(rows);
  for (int64_t c0 = 0; c0 < vocab; c0 += block)
    cpu::cross_entropy_lse_block({logits.data() + c0, rows, std::min(block, vocab - c0), vocab, c0}, targets.data(), -100,
                                 m.data(), s.data(), t.data());
  cpu::cross_entropy_finish(rows, m.data(), s.data(), t.data(), targets.data(), -100, lse.data(), loss.data());
  DeviceBuffer<float> dl(logits), dm(std::vector<float>(rows, -INFINITY)), ds(std::vector<float>(rows, 0.0f)),
      dt(std::vector<float>(rows, 0.0f)), dlse(rows), dloss(rows);
  DeviceBuffer<int64_t> dtargets(targets);
  for (int64_t c0 = 0; c0 < vocab; c0 += block)
    cuda::cross_entropy_lse_block({dl.ptr + c0, rows, std::min(block, vocab - c0), vocab, c0}, dtargets.ptr, -100,
                                  dm.ptr, ds.ptr, dt.ptr, nullptr);
  cuda::cross_entropy_finish(rows, dm.ptr, ds.ptr, dt.ptr, dtargets.ptr, -100, dlse.ptr, dloss.ptr, nullptr);
  const auto gloss = dloss.host();
  for (int64_t r = 0; r < rows; ++r) ASSERT_LE(std::abs(gloss[r] - loss[r]), 1e-5 + 1e-5 * std::abs(loss[r])) << r;
  std::vector<float> grad = logits;
  cpu::cross_entropy_grad_block(grad.data(), rows, vocab, vocab, 0, targets.data(), -100, lse.data(), 0.2f);
  DeviceBuffer<float> dscale(std::vector<float>{0.2f});
  cuda::cross_entropy_grad_block(dl.ptr, rows, vocab, vocab, 0, dtargets.ptr, -100, dlse.ptr, dscale.ptr, nullptr);
  const auto ggrad = dl.host();
  for (size_t i = 0; i < grad.size(); ++i) ASSERT_LE(std::abs(ggrad[i] - grad[i]), 1e-6 + 1e-5 * std::abs(grad[i])) << i;
}

}  // namespace
}  // namespace memopt::kernels

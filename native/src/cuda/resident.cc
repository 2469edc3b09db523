// Resident buffers of cuda plans (../resident.h): device memory on the plan's context, copied on the plan's stream, so
// span copies are ordered before the next run without waiting for them.
#include "../resident.h"

#include "launch.h"
#include "plan.h"

namespace planc {

static CudaPlan& plan_of(const Resident& r) { return *static_cast<CudaPlan*>(const_cast<void*>(r.owner)); }

static std::string driver_error(const CudaPlan& p, const char* call, CUresult rc) { return cu_error(*p.api, call, rc); }

// Whether a run of spans from `first` to `last` (offsets increasing) reads a range it also writes.
static bool run_overlaps(const CopySpan& first, const CopySpan& last) {
  const size_t s1 = last.src + last.bytes, d1 = last.dst + last.bytes;
  return first.src < d1 && first.dst < s1;
}

// Spans in order, grouped: a run of equal-length spans whose offsets advance by constant strides is one copy (1D when
// both strides equal the length, else a 2D copy with those pitches), unless in one resident the run's source and
// destination ranges would overlap (then the run stops before that span, keeping the in-order meaning).
static std::string device_copy(Resident& src, Resident& dst, const std::vector<CopySpan>& spans) {
  CudaPlan& p = plan_of(src);
  const CudaApi& api = *p.api;
  CUresult rc = api.cuCtxSetCurrent(p.ctx);
  if (rc != 0) return driver_error(p, "cuCtxSetCurrent", rc);
  const bool same = &src == &dst;
  const CUdeviceptr s_base = static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(src.data));
  const CUdeviceptr d_base = static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(dst.data));
  const size_t n = spans.size();
  size_t i = 0;
  while (i < n) {
    const CopySpan& a = spans[i];
    size_t j = i + 1, sp = 0, dp = 0;
    if (j < n && spans[j].bytes == a.bytes && spans[j].src > a.src && spans[j].dst > a.dst) {
      sp = spans[j].src - a.src;
      dp = spans[j].dst - a.dst;
      const bool flat = sp == a.bytes && dp == a.bytes;
      if (sp >= a.bytes && dp >= a.bytes && (flat || (sp <= p.max_pitch && dp <= p.max_pitch))) {
        while (j < n && spans[j].bytes == a.bytes && spans[j].src > spans[j - 1].src && spans[j].dst > spans[j - 1].dst &&
               spans[j].src - spans[j - 1].src == sp && spans[j].dst - spans[j - 1].dst == dp && !(same && run_overlaps(a, spans[j]))) {
          j++;
        }
      }
    }
    const size_t height = j - i;
    if (height == 1 || (sp == a.bytes && dp == a.bytes)) {
      rc = api.cuMemcpyDtoDAsync(d_base + a.dst, s_base + a.src, a.bytes * height, p.stream);
      if (rc != 0) return driver_error(p, "cuMemcpyDtoDAsync(resident)", rc) + " for span " + std::to_string(i);
    } else {
      CuMemcpy2D c{};
      c.srcMemoryType = kCuMemoryTypeDevice;
      c.srcDevice = s_base + a.src;
      c.srcPitch = sp;
      c.dstMemoryType = kCuMemoryTypeDevice;
      c.dstDevice = d_base + a.dst;
      c.dstPitch = dp;
      c.WidthInBytes = a.bytes;
      c.Height = height;
      rc = api.cuMemcpy2DAsync(&c, p.stream);
      if (rc != 0) return driver_error(p, "cuMemcpy2DAsync(resident)", rc) + " for spans " + std::to_string(i) + ".." + std::to_string(j - 1);
    }
    i = j;
  }
  return std::string();
}

// Host transfers wait for the copy: the caller's array may change as soon as the call returns.
static std::string device_write(Resident& r, size_t offset, const void* data, size_t bytes) {
  CudaPlan& p = plan_of(r);
  const CudaApi& api = *p.api;
  if (bytes == 0) return std::string();
  CUresult rc = api.cuCtxSetCurrent(p.ctx);
  if (rc == 0) rc = api.cuMemcpyHtoDAsync(static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(r.data + offset)), data, bytes, p.stream);
  if (rc == 0) rc = api.cuStreamSynchronize(p.stream);
  return rc == 0 ? std::string() : driver_error(p, "cuMemcpyHtoDAsync(resident)", rc);
}

static std::string device_read(Resident& r, size_t offset, void* data, size_t bytes) {
  CudaPlan& p = plan_of(r);
  const CudaApi& api = *p.api;
  if (bytes == 0) return std::string();
  CUresult rc = api.cuCtxSetCurrent(p.ctx);
  if (rc == 0) rc = api.cuMemcpyDtoHAsync(data, static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(r.data + offset)), bytes, p.stream);
  if (rc == 0) rc = api.cuStreamSynchronize(p.stream);
  return rc == 0 ? std::string() : driver_error(p, "cuMemcpyDtoHAsync(resident)", rc);
}

// Waits for the stream (a queued copy may still use the memory), then frees it.
static void device_release(Resident& r) {
  if (r.data == nullptr) return;
  CudaPlan& p = plan_of(r);
  p.api->cuCtxSetCurrent(p.ctx);
  p.api->cuStreamSynchronize(p.stream);
  p.api->cuMemFree(static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(r.data)));
  r.data = nullptr;
}

static const ResidentOps kDeviceOps = {device_copy, device_write, device_read, device_release};

std::shared_ptr<Resident> cuda_resident_new(std::shared_ptr<CudaPlan> plan, int64_t bytes, std::string* err) {
  if (bytes < 0 || bytes > kMaxResidentBytes) {
    *err = "resident size " + std::to_string(bytes) + " is negative or over 2^46 bytes";
    return nullptr;
  }
  const CudaApi& api = *plan->api;
  CUresult rc = api.cuCtxSetCurrent(plan->ctx);
  if (rc != 0) {
    *err = cu_error(api, "cuCtxSetCurrent", rc);
    return nullptr;
  }
  const size_t alloc = (static_cast<size_t>(bytes) + 255) / 256 * 256 + 256;  // never 0 bytes, 256-byte aligned
  CUdeviceptr d = 0;
  rc = api.cuMemAlloc(&d, alloc);
  if (rc != 0) {
    *err = cu_error(api, "cuMemAlloc(resident)", rc) + " for " + std::to_string(bytes) + " bytes";
    return nullptr;
  }
  auto r = std::make_shared<Resident>();
  r->data = reinterpret_cast<uint8_t*>(static_cast<uintptr_t>(d));
  r->bytes = static_cast<size_t>(bytes);
  r->device = true;
  r->owner = plan.get();
  r->ops = &kDeviceOps;
  r->keep = plan;
  rc = api.cuMemsetD8Async(d, 0, alloc, plan->stream);
  if (rc != 0) {
    *err = cu_error(api, "cuMemsetD8Async(resident)", rc);
    return nullptr;  // r's release frees d
  }
  return r;
}

}  // namespace planc

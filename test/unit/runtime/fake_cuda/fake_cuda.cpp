//===- fake_cuda.cpp - A CUDA driver API test double over host memory
//------===//
//
// The subset of libcuda's driver API the SITS runtime resolves, for tests on
// machines without a GPU: point the runtime at it with
// SITS_CUDA_DRIVER=/path/to/libsits_fake_cuda.so and the runtime's real
// driver code runs against it. Built for the tests only, never installed.
//
// * Device memory is host memory (so copies really move bytes); every
//   pointer handed to a copy, a free or a kernel is checked against the live
//   allocations (CUDA_ERROR_INVALID_VALUE / CUDA_ERROR_ILLEGAL_ADDRESS).
// * Modules: ELF (cubin), fatbin and PTX images are accepted and their
//   kernels looked up by name in the image's bytes (PTX: `.entry` lines,
//   whose parameter lists give the kernels' parameter sizes). Their launches
//   are recorded, not executed: there is no GPU to run them. Images that
//   start with "SITSFAKE\n" list, one per line, kernels the fake itself
//   implements on the host (below), which launches do run.
// * Graphs: a stream captured by cuStreamBeginCapture_v2 records its
//   kernels (with their parameters' bytes), allocations and frees instead of
//   running them; cuGraphLaunch runs the recorded kernels, each appended to
//   the launch log. A capture's allocations live until the last graph or
//   instantiation made from it is destroyed. What a capture cannot hold (a
//   synchronization of the stream, a plain allocation or free on the
//   capturing thread, a copy, a free of memory from outside the capture)
//   fails with CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED and invalidates it, so
//   cuStreamEndCapture fails with CUDA_ERROR_STREAM_CAPTURE_INVALIDATED.
// * $SITS_FAKE_CUDA_FAIL makes chosen calls fail:
//   "cuMemAlloc_v2=2,cuLaunchKernel=719@3" fails every cuMemAlloc_v2 with
//   CUDA_ERROR_OUT_OF_MEMORY and the 3rd cuLaunchKernel (counted since the
//   last sitsFakeCudaReset) with CUDA_ERROR_LAUNCH_FAILED. Read at each call.
// * $SITS_FAKE_CUDA_DEVICES: how many devices (default 1);
//   $SITS_FAKE_CUDA_NO_POOLS=1: cuMemAllocAsync reports
//   CUDA_ERROR_NOT_SUPPORTED, as on devices without memory pools.
// * sitsFakeCuda* functions report what is live and what was launched.
// * The same functions are exported under HIP's names (hipMalloc,
//   hipModuleLaunchKernel, ...), for $SITS_HIP_DRIVER.
//
//===----------------------------------------------------------------------===//
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#define FAKE_API extern "C" __attribute__((visibility("default")))

namespace {

enum : int {
  kSuccess = 0,
  kInvalidValue = 1,
  kOutOfMemory = 2,
  kNotInitialized = 3,
  kInvalidDevice = 101,
  kInvalidImage = 200,
  kInvalidContext = 201,
  kInvalidHandle = 400,
  kNotFound = 500,
  kIllegalAddress = 700,
  kLaunchFailed = 719,
  kNotSupported = 801,
  kCaptureUnsupported = 900,
  kCaptureInvalidated = 901,
};

struct Kernel {
  std::string name;
  /// Byte sizes of the parameters when the image says (PTX, SITSFAKE).
  std::vector<int> params;
  bool known = false;
};

struct Module {
  std::vector<Kernel> kernels;
  /// Binary images: the bytes names are searched in.
  std::string bytes;
  bool fake = false;
};

struct Function {
  Module *module;
  Kernel kernel;
};

struct Launch {
  std::string name;
  unsigned dims[7];
  void *stream;
  int params = -1;         // -1: unknown
  int paramsInBuffers = 0; // 8-byte parameters that point into live buffers
};

/// A kernel recorded by a capture, with its parameters' bytes.
struct Node {
  Function *function;
  unsigned dims[7];
  std::vector<std::vector<uint8_t>> params;
};

/// The buffers a capture allocated: freed with the last graph or
/// instantiation that holds them.
struct GraphMemory {
  std::vector<uintptr_t> buffers;
  int refs = 0;
};

struct Capture {
  std::vector<Node> nodes;
  GraphMemory *memory = new GraphMemory();
  bool invalid = false;
};

/// A graph and an instantiated graph (cuGraph / cuGraphExec) alike.
struct Graph {
  std::vector<Node> nodes;
  GraphMemory *memory;
  bool instantiated;
};

struct State {
  std::mutex mu;
  std::map<void *, Capture> captures; // by stream
  std::set<Graph *> graphs;
  uint64_t graphLaunches = 0;
  std::set<void *> pinned; // page-locked host allocations
  bool initialized = false;
  std::map<uintptr_t, size_t> buffers; // base -> size
  std::set<Module *> modules;
  std::set<void *> streams;
  std::set<Function *> functions;
  int contextRetains = 0;
  std::map<std::string, int> calls;
  std::vector<Launch> launches;
  int jitOptLevel = -1;
  uint64_t copiedToDevice = 0, copiedToHost = 0;
  /// The default memory pool's release threshold (0, as the driver's).
  uint64_t releaseThreshold = 0;
};

State &state() {
  static State *s = new State();
  return *s;
}

int contextToken;
/// Current contexts are per thread, as the driver's.
thread_local void *tCurrentContext = nullptr;
/// The stream this thread is capturing (thread-local capture mode).
thread_local void *tCapturing = nullptr;

bool hasContext(State &s) { return tCurrentContext && s.contextRetains > 0; }

/// The injected error for this call of `fn`, or 0. Caller holds the lock.
int injected(State &s, const char *fn) {
  int n = ++s.calls[fn];
  const char *spec = std::getenv("SITS_FAKE_CUDA_FAIL");
  if (!spec)
    return 0;
  std::string all(spec);
  size_t pos = 0;
  while (pos <= all.size()) {
    size_t end = all.find(',', pos);
    std::string item = all.substr(
        pos, end == std::string::npos ? std::string::npos : end - pos);
    size_t eq = item.find('=');
    if (eq != std::string::npos && item.substr(0, eq) == fn) {
      std::string rest = item.substr(eq + 1);
      size_t at = rest.find('@');
      int code = std::atoi(rest.substr(0, at).c_str());
      if (at == std::string::npos || std::atoi(rest.c_str() + at + 1) == n)
        return code;
    }
    if (end == std::string::npos)
      break;
    pos = end + 1;
  }
  return 0;
}

#define FAKE_ENTER(name)                                                       \
  State &s = state();                                                          \
  std::lock_guard<std::mutex> lock(s.mu);                                      \
  if (int injectedError = injected(s, name))                                   \
    return injectedError;

/// Whether [p, p + n) lies in one live buffer.
bool inBuffer(State &s, uintptr_t p, size_t n) {
  auto it = s.buffers.upper_bound(p);
  if (it == s.buffers.begin())
    return false;
  --it;
  return p >= it->first && p + n <= it->first + it->second && p + n >= p;
}

int deviceCount() {
  const char *n = std::getenv("SITS_FAKE_CUDA_DEVICES");
  return n ? std::atoi(n) : 1;
}

int allocate(State &s, unsigned long long *ptr, size_t bytes) {
  if (!ptr || bytes == 0)
    return kInvalidValue;
  if (!hasContext(s))
    return kInvalidContext;
  // 256-byte aligned, as the real driver's.
  void *p = std::aligned_alloc(256, (bytes + 255) / 256 * 256);
  if (!p)
    return kOutOfMemory;
  std::memset(p, 0, bytes);
  s.buffers[uintptr_t(p)] = bytes;
  *ptr = uintptr_t(p);
  return kSuccess;
}

int release(State &s, unsigned long long ptr) {
  auto it = s.buffers.find(uintptr_t(ptr));
  if (it == s.buffers.end())
    return kInvalidValue;
  std::free(reinterpret_cast<void *>(it->first));
  s.buffers.erase(it);
  return kSuccess;
}

bool validStream(State &s, void *stream) {
  return !stream || s.streams.count(stream);
}

/// The capture of `stream`, or nullptr.
Capture *captureOf(State &s, void *stream) {
  auto it = stream ? s.captures.find(stream) : s.captures.end();
  return it == s.captures.end() ? nullptr : &it->second;
}

/// An operation a capture cannot hold: it fails and invalidates the
/// capture.
int unsupportedInCapture(Capture &c) {
  c.invalid = true;
  return kCaptureUnsupported;
}

/// Whether this thread's capture forbids a plain allocation or free; if so
/// it is invalidated.
bool forbiddenWhileCapturing(State &s) {
  Capture *c = captureOf(s, tCapturing);
  if (!c)
    return false;
  c->invalid = true;
  return true;
}

void dropMemory(State &s, GraphMemory *m) {
  if (--m->refs > 0)
    return;
  for (uintptr_t p : m->buffers)
    if (s.buffers.erase(p))
      std::free(reinterpret_cast<void *>(p));
  delete m;
}

/// What every copy and fill checks: a current context, a known stream, and
/// each of `ranges` inside a live buffer.
int checkTransfer(State &s, void *stream,
                  std::initializer_list<std::pair<uintptr_t, size_t>> ranges) {
  if (!hasContext(s))
    return kInvalidContext;
  if (!validStream(s, stream))
    return kInvalidHandle;
  if (Capture *c = captureOf(s, stream))
    return unsupportedInCapture(*c);
  for (auto [p, n] : ranges)
    if (!inBuffer(s, p, n))
      return kInvalidValue;
  return kSuccess;
}

/// Parameter byte sizes of a PTX `.param` list ("(.param .u64 a, .param .f32
/// b)"); -1 for aggregates.
std::vector<int> ptxParams(const std::string &list) {
  std::vector<int> out;
  size_t pos = 0;
  while ((pos = list.find(".param", pos)) != std::string::npos) {
    pos += 6;
    size_t end = list.find_first_of(",)", pos);
    std::string decl = list.substr(pos, end - pos);
    int size = -1;
    if (decl.find('[') == std::string::npos) {
      for (const char *t : {".u64", ".s64", ".b64", ".f64"})
        if (decl.find(t) != std::string::npos)
          size = 8;
      for (const char *t : {".u32", ".s32", ".b32", ".f32"})
        if (decl.find(t) != std::string::npos)
          size = 4;
    }
    out.push_back(size);
  }
  return out;
}

std::vector<Kernel> ptxKernels(const std::string &ptx) {
  std::vector<Kernel> out;
  size_t pos = 0;
  while ((pos = ptx.find(".entry ", pos)) != std::string::npos) {
    pos += 7;
    size_t open = ptx.find('(', pos);
    size_t close = ptx.find(')', open);
    if (open == std::string::npos || close == std::string::npos)
      break;
    Kernel k;
    k.name = ptx.substr(pos, open - pos);
    while (!k.name.empty() && (k.name.back() == ' ' || k.name.back() == '\n'))
      k.name.pop_back();
    k.params = ptxParams(ptx.substr(open, close - open + 1));
    k.known = true;
    out.push_back(std::move(k));
    pos = close;
  }
  return out;
}

// Kernels the fake runs (images "SITSFAKE\n<name>\n...").
//   sits_fake_add_f32(const float *a, const float *b, float *c, int64_t n,
//                     int64_t bn): c[i] = a[i] + b[i % bn] for i < n, one
//   element per thread.
const std::map<std::string, std::vector<int>> kFakeKernels = {
    {"sits_fake_add_f32", {8, 8, 8, 8, 8}}};

int runFakeKernel(State &s, const std::string &name, const unsigned dims[6],
                  void **params) {
  if (name == "sits_fake_add_f32") {
    float *a, *b, *c;
    int64_t n, bn;
    std::memcpy(&a, params[0], 8);
    std::memcpy(&b, params[1], 8);
    std::memcpy(&c, params[2], 8);
    std::memcpy(&n, params[3], 8);
    std::memcpy(&bn, params[4], 8);
    uint64_t threads =
        uint64_t(dims[0]) * dims[1] * dims[2] * dims[3] * dims[4] * dims[5];
    if (n < 0 || bn <= 0 || uint64_t(n) > threads)
      return kLaunchFailed;
    size_t bytes = size_t(n) * sizeof(float);
    if (!inBuffer(s, uintptr_t(a), bytes) ||
        !inBuffer(s, uintptr_t(c), bytes) ||
        !inBuffer(s, uintptr_t(b), size_t(bn) * sizeof(float)))
      return kIllegalAddress;
    for (int64_t i = 0; i < n; ++i)
      c[i] = a[i] + b[i % bn];
    return kSuccess;
  }
  return kLaunchFailed;
}

/// The byte size of a binary image: ELF (from its section headers) or fatbin
/// (from its header); 0 when not one.
size_t binarySize(const unsigned char *p) {
  if (std::memcmp(p,
                  "\x7f"
                  "ELF",
                  4) == 0 &&
      p[4] == 2) {
    uint64_t shoff;
    uint16_t shentsize, shnum;
    std::memcpy(&shoff, p + 0x28, 8);
    std::memcpy(&shentsize, p + 0x3a, 2);
    std::memcpy(&shnum, p + 0x3c, 2);
    return size_t(shoff + uint64_t(shentsize) * shnum);
  }
  uint32_t magic;
  std::memcpy(&magic, p, 4);
  if (magic == 0xBA55ED50u) {
    uint16_t headerSize;
    uint64_t fatSize;
    std::memcpy(&headerSize, p + 6, 2);
    std::memcpy(&fatSize, p + 8, 8);
    return size_t(headerSize + fatSize);
  }
  return 0;
}

int loadModule(State &s, void **out, const void *image, bool jit) {
  if (!out || !image)
    return kInvalidValue;
  if (!hasContext(s))
    return kInvalidContext;
  auto *bytes = static_cast<const unsigned char *>(image);
  auto m = new Module();
  const char *text = static_cast<const char *>(image);
  if (std::strncmp(text, "SITSFAKE\n", 9) == 0) {
    m->fake = true;
    std::string list(text + 9);
    size_t pos = 0;
    while (pos < list.size()) {
      size_t nl = list.find('\n', pos);
      std::string name = list.substr(pos, nl - pos);
      if (!name.empty()) {
        auto it = kFakeKernels.find(name);
        if (it == kFakeKernels.end()) {
          delete m;
          return kInvalidImage;
        }
        m->kernels.push_back({name, it->second, true});
      }
      if (nl == std::string::npos)
        break;
      pos = nl + 1;
    }
  } else if (size_t n = jit ? 0 : binarySize(bytes)) {
    m->bytes.assign(text, n);
  } else if (std::strstr(text, ".version") && std::strstr(text, ".target")) {
    m->kernels = ptxKernels(text);
  } else {
    delete m;
    return kInvalidImage;
  }
  s.modules.insert(m);
  *out = m;
  return kSuccess;
}

/// Logs a launch of `f` and runs it when the fake implements it.
int runLaunch(State &s, Function *f, const unsigned dims[7], void *stream,
              void **params) {
  Launch l;
  l.name = f->kernel.name;
  std::memcpy(l.dims, dims, sizeof(l.dims));
  l.stream = stream;
  if (f->kernel.known) {
    l.params = int(f->kernel.params.size());
    for (size_t i = 0; i < f->kernel.params.size(); ++i)
      if (f->kernel.params[i] == 8) {
        uint64_t v;
        std::memcpy(&v, params[i], 8);
        l.paramsInBuffers += inBuffer(s, uintptr_t(v), 1);
      }
  }
  s.launches.push_back(l);
  if (f->module->fake)
    return runFakeKernel(s, f->kernel.name, dims, params);
  return kSuccess;
}

} // namespace

// --- the driver API ---------------------------------------------------------

FAKE_API int cuInit(unsigned flags) {
  FAKE_ENTER("cuInit");
  if (flags != 0)
    return kInvalidValue;
  s.initialized = true;
  return kSuccess;
}

FAKE_API int cuDeviceGetCount(int *count) {
  FAKE_ENTER("cuDeviceGetCount");
  if (!s.initialized)
    return kNotInitialized;
  *count = deviceCount();
  return kSuccess;
}

FAKE_API int cuDeviceGet(int *device, int ordinal) {
  FAKE_ENTER("cuDeviceGet");
  if (ordinal < 0 || ordinal >= deviceCount())
    return kInvalidDevice;
  *device = ordinal;
  return kSuccess;
}

FAKE_API int cuDeviceGetName(char *name, int len, int device) {
  FAKE_ENTER("cuDeviceGetName");
  if (device < 0 || device >= deviceCount())
    return kInvalidDevice;
  std::string n = "SITS fake CUDA device " + std::to_string(device);
  std::strncpy(name, n.c_str(), size_t(len));
  return kSuccess;
}

FAKE_API int cuDeviceGetAttribute(int *value, int attribute, int device) {
  FAKE_ENTER("cuDeviceGetAttribute");
  if (device < 0 || device >= deviceCount())
    return kInvalidDevice;
  if (attribute == 75) // compute capability: 9.0
    *value = 9;
  else if (attribute == 76)
    *value = 0;
  else
    return kInvalidValue;
  return kSuccess;
}

FAKE_API int cuDevicePrimaryCtxRetain(void **context, int device) {
  FAKE_ENTER("cuDevicePrimaryCtxRetain");
  if (device < 0 || device >= deviceCount())
    return kInvalidDevice;
  ++s.contextRetains;
  *context = &contextToken;
  return kSuccess;
}

FAKE_API int cuDevicePrimaryCtxRelease_v2(int device) {
  FAKE_ENTER("cuDevicePrimaryCtxRelease_v2");
  if (device < 0 || device >= deviceCount() || s.contextRetains == 0)
    return kInvalidDevice;
  --s.contextRetains;
  return kSuccess;
}

FAKE_API int cuCtxSetCurrent(void *context) {
  FAKE_ENTER("cuCtxSetCurrent");
  if (context && (context != &contextToken || s.contextRetains == 0))
    return kInvalidContext;
  tCurrentContext = context;
  return kSuccess;
}

FAKE_API int cuMemAlloc_v2(unsigned long long *ptr, size_t bytes) {
  FAKE_ENTER("cuMemAlloc_v2");
  if (forbiddenWhileCapturing(s))
    return kCaptureUnsupported;
  return allocate(s, ptr, bytes);
}

FAKE_API int cuMemFree_v2(unsigned long long ptr) {
  FAKE_ENTER("cuMemFree_v2");
  if (!hasContext(s))
    return kInvalidContext;
  if (forbiddenWhileCapturing(s))
    return kCaptureUnsupported;
  return release(s, ptr);
}

FAKE_API int cuMemHostAlloc(void **ptr, size_t bytes, unsigned flags) {
  FAKE_ENTER("cuMemHostAlloc");
  if (!ptr || bytes == 0 || flags > 0xf)
    return kInvalidValue;
  if (!hasContext(s))
    return kInvalidContext;
  if (forbiddenWhileCapturing(s))
    return kCaptureUnsupported;
  *ptr = std::malloc(bytes);
  if (!*ptr)
    return kOutOfMemory;
  s.pinned.insert(*ptr);
  return kSuccess;
}

FAKE_API int cuMemFreeHost(void *ptr) {
  FAKE_ENTER("cuMemFreeHost");
  if (!s.pinned.erase(ptr))
    return kInvalidValue;
  std::free(ptr);
  return kSuccess;
}

FAKE_API int cuMemAllocAsync(unsigned long long *ptr, size_t bytes,
                             void *stream) {
  FAKE_ENTER("cuMemAllocAsync");
  const char *noPools = std::getenv("SITS_FAKE_CUDA_NO_POOLS");
  if (noPools && *noPools == '1')
    return kNotSupported;
  if (!validStream(s, stream))
    return kInvalidHandle;
  int rc = allocate(s, ptr, bytes);
  if (Capture *c = captureOf(s, stream); c && rc == kSuccess)
    c->memory->buffers.push_back(uintptr_t(*ptr));
  return rc;
}

FAKE_API int cuMemFreeAsync(unsigned long long ptr, void *stream) {
  FAKE_ENTER("cuMemFreeAsync");
  if (!hasContext(s))
    return kInvalidContext;
  if (!validStream(s, stream))
    return kInvalidHandle;
  if (Capture *c = captureOf(s, stream)) {
    // A free node: the buffer stays with the graph.
    const std::vector<uintptr_t> &own = c->memory->buffers;
    return std::find(own.begin(), own.end(), uintptr_t(ptr)) != own.end()
               ? kSuccess
               : unsupportedInCapture(*c);
  }
  return release(s, ptr);
}

int memPoolToken;

FAKE_API int cuDeviceGetDefaultMemPool(void **pool, int device) {
  FAKE_ENTER("cuDeviceGetDefaultMemPool");
  if (device < 0 || device >= deviceCount())
    return kInvalidDevice;
  *pool = &memPoolToken;
  return kSuccess;
}

FAKE_API int cuMemPoolSetAttribute(void *pool, int attribute, void *value) {
  FAKE_ENTER("cuMemPoolSetAttribute");
  if (pool != &memPoolToken || attribute != 4) // RELEASE_THRESHOLD only
    return kInvalidValue;
  std::memcpy(&s.releaseThreshold, value, sizeof(uint64_t));
  return kSuccess;
}

FAKE_API int cuMemcpyHtoDAsync_v2(unsigned long long dst, const void *src,
                                  size_t bytes, void *stream) {
  FAKE_ENTER("cuMemcpyHtoDAsync_v2");
  if (int rc = checkTransfer(s, stream, {{uintptr_t(dst), bytes}}))
    return rc;
  std::memcpy(reinterpret_cast<void *>(uintptr_t(dst)), src, bytes);
  s.copiedToDevice += bytes;
  return kSuccess;
}

FAKE_API int cuMemcpyDtoHAsync_v2(void *dst, unsigned long long src,
                                  size_t bytes, void *stream) {
  FAKE_ENTER("cuMemcpyDtoHAsync_v2");
  if (int rc = checkTransfer(s, stream, {{uintptr_t(src), bytes}}))
    return rc;
  std::memcpy(dst, reinterpret_cast<void *>(uintptr_t(src)), bytes);
  s.copiedToHost += bytes;
  return kSuccess;
}

FAKE_API int cuMemcpyDtoDAsync_v2(unsigned long long dst,
                                  unsigned long long src, size_t bytes,
                                  void *stream) {
  FAKE_ENTER("cuMemcpyDtoDAsync_v2");
  if (int rc = checkTransfer(
          s, stream, {{uintptr_t(src), bytes}, {uintptr_t(dst), bytes}}))
    return rc;
  std::memmove(reinterpret_cast<void *>(uintptr_t(dst)),
               reinterpret_cast<void *>(uintptr_t(src)), bytes);
  return kSuccess;
}

FAKE_API int cuMemsetD8Async(unsigned long long dst, unsigned char value,
                             size_t bytes, void *stream) {
  FAKE_ENTER("cuMemsetD8Async");
  if (int rc = checkTransfer(s, stream, {{uintptr_t(dst), bytes}}))
    return rc;
  std::memset(reinterpret_cast<void *>(uintptr_t(dst)), value, bytes);
  return kSuccess;
}

FAKE_API int cuStreamCreate(void **stream, unsigned flags) {
  FAKE_ENTER("cuStreamCreate");
  if (!hasContext(s))
    return kInvalidContext;
  if (flags > 1)
    return kInvalidValue;
  void *handle = std::malloc(1);
  s.streams.insert(handle);
  *stream = handle;
  return kSuccess;
}

FAKE_API int cuStreamDestroy_v2(void *stream) {
  FAKE_ENTER("cuStreamDestroy_v2");
  if (!s.streams.erase(stream))
    return kInvalidHandle;
  std::free(stream);
  return kSuccess;
}

FAKE_API int cuStreamSynchronize(void *stream) {
  FAKE_ENTER("cuStreamSynchronize");
  if (!hasContext(s))
    return kInvalidContext;
  if (Capture *c = captureOf(s, stream))
    return unsupportedInCapture(*c);
  return validStream(s, stream) ? kSuccess : kInvalidHandle;
}

FAKE_API int cuModuleLoadData(void **module, const void *image) {
  FAKE_ENTER("cuModuleLoadData");
  return loadModule(s, module, image, false);
}

FAKE_API int cuModuleLoadDataEx(void **module, const void *image,
                                unsigned numOptions, int *options,
                                void **values) {
  FAKE_ENTER("cuModuleLoadDataEx");
  for (unsigned i = 0; i < numOptions; ++i)
    if (options[i] == 7) // CU_JIT_OPTIMIZATION_LEVEL
      s.jitOptLevel = int(reinterpret_cast<intptr_t>(values[i]));
  return loadModule(s, module, image, true);
}

FAKE_API int cuModuleUnload(void *module) {
  FAKE_ENTER("cuModuleUnload");
  if (!hasContext(s))
    return kInvalidContext;
  auto *m = static_cast<Module *>(module);
  if (!s.modules.erase(m))
    return kInvalidHandle;
  for (auto it = s.functions.begin(); it != s.functions.end();) {
    if ((*it)->module == m) {
      delete *it;
      it = s.functions.erase(it);
    } else {
      ++it;
    }
  }
  delete m;
  return kSuccess;
}

FAKE_API int cuModuleGetFunction(void **function, void *module,
                                 const char *name) {
  FAKE_ENTER("cuModuleGetFunction");
  if (!hasContext(s))
    return kInvalidContext;
  auto *m = static_cast<Module *>(module);
  if (!s.modules.count(m))
    return kInvalidHandle;
  Kernel found;
  bool ok = false;
  for (const Kernel &k : m->kernels)
    if (k.name == name) {
      found = k;
      ok = true;
    }
  if (!ok && !m->bytes.empty() && m->bytes.find(name) != std::string::npos) {
    found.name = name;
    ok = true;
  }
  if (!ok)
    return kNotFound;
  auto *f = new Function{m, found};
  s.functions.insert(f);
  *function = f;
  return kSuccess;
}

FAKE_API int cuLaunchKernel(void *function, unsigned gx, unsigned gy,
                            unsigned gz, unsigned bx, unsigned by, unsigned bz,
                            unsigned smem, void *stream, void **params,
                            void **extra) {
  FAKE_ENTER("cuLaunchKernel");
  if (!hasContext(s))
    return kInvalidContext;
  auto *f = static_cast<Function *>(function);
  if (!s.functions.count(f) || !validStream(s, stream))
    return kInvalidHandle;
  if (!gx || !gy || !gz || !bx || !by || !bz || uint64_t(bx) * by * bz > 1024 ||
      smem > 48 * 1024 || (!params && !extra) || extra)
    return kInvalidValue;
  unsigned dims[7] = {gx, gy, gz, bx, by, bz, smem};
  if (Capture *c = captureOf(s, stream)) {
    Node n{f, {}, {}};
    std::memcpy(n.dims, dims, sizeof(dims));
    if (f->kernel.known)
      for (size_t i = 0; i < f->kernel.params.size(); ++i) {
        int size = f->kernel.params[i];
        if (size < 0) // an aggregate: cannot be recorded
          return unsupportedInCapture(*c);
        auto *bytes = static_cast<const uint8_t *>(params[i]);
        n.params.emplace_back(bytes, bytes + size);
      }
    c->nodes.push_back(std::move(n));
    return kSuccess;
  }
  return runLaunch(s, f, dims, stream, params);
}

// --- graphs -----------------------------------------------------------------

FAKE_API int cuStreamBeginCapture_v2(void *stream, int mode) {
  FAKE_ENTER("cuStreamBeginCapture_v2");
  if (!hasContext(s))
    return kInvalidContext;
  if (!stream || !s.streams.count(stream)) // the legacy stream cannot be
    return kInvalidHandle;                 // captured
  if (mode < 0 || mode > 2 || captureOf(s, stream) || tCapturing)
    return kInvalidValue;
  s.captures[stream];
  tCapturing = stream;
  return kSuccess;
}

FAKE_API int cuStreamEndCapture(void *stream, void **graph) {
  // An injected failure still ends the capture, as the driver's do.
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  int injectedError = injected(s, "cuStreamEndCapture");
  Capture *c = captureOf(s, stream);
  if (!c || !graph)
    return kInvalidValue;
  Capture done = std::move(*c);
  s.captures.erase(stream);
  if (tCapturing == stream)
    tCapturing = nullptr;
  done.memory->refs = 1;
  if (done.invalid || injectedError) {
    dropMemory(s, done.memory);
    *graph = nullptr;
    return injectedError ? injectedError : kCaptureInvalidated;
  }
  auto *g = new Graph{std::move(done.nodes), done.memory, false};
  s.graphs.insert(g);
  *graph = g;
  return kSuccess;
}

FAKE_API int cuGraphInstantiateWithFlags(void **exec, void *graph,
                                         unsigned long long flags) {
  FAKE_ENTER("cuGraphInstantiateWithFlags");
  auto *g = static_cast<Graph *>(graph);
  if (!exec || !s.graphs.count(g) || g->instantiated || flags > 1)
    return kInvalidValue;
  ++g->memory->refs;
  auto *e = new Graph{g->nodes, g->memory, true};
  s.graphs.insert(e);
  *exec = e;
  return kSuccess;
}

FAKE_API int cuGraphLaunch(void *exec, void *stream) {
  FAKE_ENTER("cuGraphLaunch");
  if (!hasContext(s))
    return kInvalidContext;
  auto *e = static_cast<Graph *>(exec);
  if (!s.graphs.count(e) || !e->instantiated || !validStream(s, stream))
    return kInvalidHandle;
  if (Capture *c = captureOf(s, stream))
    return unsupportedInCapture(*c);
  ++s.graphLaunches;
  for (Node &n : e->nodes) {
    if (!s.functions.count(n.function)) // its module was unloaded
      return kInvalidHandle;
    std::vector<void *> params;
    for (std::vector<uint8_t> &p : n.params)
      params.push_back(p.data());
    if (int rc = runLaunch(s, n.function, n.dims, stream, params.data()))
      return rc;
  }
  return kSuccess;
}

static int destroyGraph(State &s, void *graph, bool instantiated) {
  auto *g = static_cast<Graph *>(graph);
  if (!s.graphs.count(g) || g->instantiated != instantiated)
    return kInvalidValue;
  s.graphs.erase(g);
  dropMemory(s, g->memory);
  delete g;
  return kSuccess;
}

FAKE_API int cuGraphExecDestroy(void *exec) {
  FAKE_ENTER("cuGraphExecDestroy");
  return destroyGraph(s, exec, true);
}

FAKE_API int cuGraphDestroy(void *graph) {
  FAKE_ENTER("cuGraphDestroy");
  return destroyGraph(s, graph, false);
}

FAKE_API int cuGetErrorName(int error, const char **name) {
  static const std::map<int, const char *> names = {
      {kSuccess, "CUDA_SUCCESS"},
      {kInvalidValue, "CUDA_ERROR_INVALID_VALUE"},
      {kOutOfMemory, "CUDA_ERROR_OUT_OF_MEMORY"},
      {kNotInitialized, "CUDA_ERROR_NOT_INITIALIZED"},
      {100, "CUDA_ERROR_NO_DEVICE"},
      {kInvalidDevice, "CUDA_ERROR_INVALID_DEVICE"},
      {kInvalidImage, "CUDA_ERROR_INVALID_IMAGE"},
      {kInvalidContext, "CUDA_ERROR_INVALID_CONTEXT"},
      {209, "CUDA_ERROR_NO_BINARY_FOR_GPU"},
      {218, "CUDA_ERROR_INVALID_PTX"},
      {kInvalidHandle, "CUDA_ERROR_INVALID_HANDLE"},
      {kNotFound, "CUDA_ERROR_NOT_FOUND"},
      {kIllegalAddress, "CUDA_ERROR_ILLEGAL_ADDRESS"},
      {kLaunchFailed, "CUDA_ERROR_LAUNCH_FAILED"},
      {kNotSupported, "CUDA_ERROR_NOT_SUPPORTED"},
      {kCaptureUnsupported, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED"},
      {kCaptureInvalidated, "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED"},
  };
  auto it = names.find(error);
  if (it == names.end())
    return kInvalidValue;
  *name = it->second;
  return kSuccess;
}

FAKE_API int cuGetErrorString(int error, const char **text) {
  const char *name = nullptr;
  if (cuGetErrorName(error, &name) != kSuccess)
    return kInvalidValue;
  *text = error == kOutOfMemory ? "out of memory" : "fake driver error";
  return kSuccess;
}

// --- introspection for the tests -------------------------------------------

FAKE_API void sitsFakeCudaReset() {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  s.calls.clear();
  s.launches.clear();
  s.jitOptLevel = -1;
  s.copiedToDevice = s.copiedToHost = 0;
  s.graphLaunches = 0;
}

/// {live graphs, live instantiated graphs, graph launches since the last
///  reset, streams being captured, live page-locked host allocations}.
FAKE_API void sitsFakeCudaGraphStats(long long out[5]) {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  long long graphs = 0, execs = 0;
  for (Graph *g : s.graphs)
    (g->instantiated ? execs : graphs) += 1;
  out[0] = graphs;
  out[1] = execs;
  out[2] = (long long)s.graphLaunches;
  out[3] = (long long)s.captures.size();
  out[4] = (long long)s.pinned.size();
}

/// {live buffers, live modules, live streams, context retains, launches,
///  calls of `fn` (or 0 when null), JIT optimization level, bytes copied to
///  the device, bytes copied to the host, the memory pool's release
///  threshold (-1 for the maximum)}.
FAKE_API void sitsFakeCudaStats(const char *fn, long long out[10]) {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  out[0] = (long long)s.buffers.size();
  out[1] = (long long)s.modules.size();
  out[2] = (long long)s.streams.size();
  out[3] = s.contextRetains;
  out[4] = (long long)s.launches.size();
  out[5] = fn && s.calls.count(fn) ? s.calls[fn] : 0;
  out[6] = s.jitOptLevel;
  out[7] = (long long)s.copiedToDevice;
  out[8] = (long long)s.copiedToHost;
  out[9] =
      s.releaseThreshold == UINT64_MAX ? -1 : (long long)s.releaseThreshold;
}

/// Launch `i`: its kernel's name (into `name`), grid, block and shared
/// bytes (`dims`), its parameter count (-1 unknown) and how many of its
/// 8-byte parameters point into live buffers. 0, or -1 when out of range.
FAKE_API int sitsFakeCudaLaunch(int i, char *name, int nameSize,
                                unsigned dims[7], int *params,
                                int *paramsInBuffers) {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  if (i < 0 || size_t(i) >= s.launches.size())
    return -1;
  const Launch &l = s.launches[size_t(i)];
  std::snprintf(name, size_t(nameSize), "%s", l.name.c_str());
  std::memcpy(dims, l.dims, sizeof(l.dims));
  *params = l.params;
  *paramsInBuffers = l.paramsInBuffers;
  return 0;
}

// --- the same device under HIP's names
// ----------------------------------------- $SITS_HIP_DRIVER may point at this
// library too: these are the functions above under HIP's names and signatures
// (device pointers are pointers, error names are returned). They share the
// state, and failures are injected by the CUDA names ("cuMemAllocAsync=2" fails
// hipMallocAsync).

FAKE_API int hipInit(unsigned flags) { return cuInit(flags); }
FAKE_API int hipGetDeviceCount(int *count) { return cuDeviceGetCount(count); }
FAKE_API int hipDeviceGet(int *device, int ordinal) {
  return cuDeviceGet(device, ordinal);
}
FAKE_API int hipDeviceGetName(char *name, int len, int device) {
  return cuDeviceGetName(name, len, device);
}
FAKE_API int hipDevicePrimaryCtxRetain(void **context, int device) {
  return cuDevicePrimaryCtxRetain(context, device);
}
FAKE_API int hipDevicePrimaryCtxRelease(int device) {
  return cuDevicePrimaryCtxRelease_v2(device);
}
FAKE_API int hipCtxSetCurrent(void *context) {
  return cuCtxSetCurrent(context);
}
FAKE_API int hipMalloc(void **ptr, size_t bytes) {
  unsigned long long p = 0;
  int rc = cuMemAlloc_v2(&p, bytes);
  *ptr = reinterpret_cast<void *>(uintptr_t(p));
  return rc;
}
FAKE_API int hipFree(void *ptr) { return cuMemFree_v2(uintptr_t(ptr)); }
FAKE_API int hipHostMalloc(void **ptr, size_t bytes, unsigned flags) {
  return cuMemHostAlloc(ptr, bytes, flags);
}
FAKE_API int hipHostFree(void *ptr) { return cuMemFreeHost(ptr); }
FAKE_API int hipMallocAsync(void **ptr, size_t bytes, void *stream) {
  unsigned long long p = 0;
  int rc = cuMemAllocAsync(&p, bytes, stream);
  *ptr = reinterpret_cast<void *>(uintptr_t(p));
  return rc;
}
FAKE_API int hipFreeAsync(void *ptr, void *stream) {
  return cuMemFreeAsync(uintptr_t(ptr), stream);
}
FAKE_API int hipDeviceGetDefaultMemPool(void **pool, int device) {
  return cuDeviceGetDefaultMemPool(pool, device);
}
FAKE_API int hipMemPoolSetAttribute(void *pool, int attribute, void *value) {
  return cuMemPoolSetAttribute(pool, attribute, value);
}
FAKE_API int hipMemcpyHtoDAsync(void *dst, void *src, size_t bytes,
                                void *stream) {
  return cuMemcpyHtoDAsync_v2(uintptr_t(dst), src, bytes, stream);
}
FAKE_API int hipMemcpyDtoDAsync(void *dst, void *src, size_t bytes,
                                void *stream) {
  return cuMemcpyDtoDAsync_v2(uintptr_t(dst), uintptr_t(src), bytes, stream);
}
FAKE_API int hipMemsetD8Async(void *dst, unsigned char value, size_t bytes,
                              void *stream) {
  return cuMemsetD8Async(uintptr_t(dst), value, bytes, stream);
}
FAKE_API int hipMemcpyDtoHAsync(void *dst, void *src, size_t bytes,
                                void *stream) {
  return cuMemcpyDtoHAsync_v2(dst, uintptr_t(src), bytes, stream);
}
FAKE_API int hipStreamCreateWithFlags(void **stream, unsigned flags) {
  return cuStreamCreate(stream, flags);
}
FAKE_API int hipStreamDestroy(void *stream) {
  return cuStreamDestroy_v2(stream);
}
FAKE_API int hipStreamSynchronize(void *stream) {
  return cuStreamSynchronize(stream);
}
FAKE_API int hipModuleLoadData(void **module, const void *image) {
  return cuModuleLoadData(module, image);
}
FAKE_API int hipModuleLoadDataEx(void **module, const void *image, unsigned n,
                                 int *options, void **values) {
  return cuModuleLoadDataEx(module, image, n, options, values);
}
FAKE_API int hipModuleUnload(void *module) { return cuModuleUnload(module); }
FAKE_API int hipModuleGetFunction(void **function, void *module,
                                  const char *name) {
  return cuModuleGetFunction(function, module, name);
}
FAKE_API int hipModuleLaunchKernel(void *function, unsigned gx, unsigned gy,
                                   unsigned gz, unsigned bx, unsigned by,
                                   unsigned bz, unsigned smem, void *stream,
                                   void **params, void **extra) {
  return cuLaunchKernel(function, gx, gy, gz, bx, by, bz, smem, stream, params,
                        extra);
}
FAKE_API int hipStreamBeginCapture(void *stream, int mode) {
  return cuStreamBeginCapture_v2(stream, mode);
}
FAKE_API int hipStreamEndCapture(void *stream, void **graph) {
  return cuStreamEndCapture(stream, graph);
}
FAKE_API int hipGraphInstantiateWithFlags(void **exec, void *graph,
                                          unsigned long long flags) {
  return cuGraphInstantiateWithFlags(exec, graph, flags);
}
FAKE_API int hipGraphLaunch(void *exec, void *stream) {
  return cuGraphLaunch(exec, stream);
}
FAKE_API int hipGraphExecDestroy(void *exec) {
  return cuGraphExecDestroy(exec);
}
FAKE_API int hipGraphDestroy(void *graph) { return cuGraphDestroy(graph); }
FAKE_API const char *hipGetErrorName(int error) {
  const char *name = nullptr;
  return cuGetErrorName(error, &name) == kSuccess ? name : "hipErrorUnknown";
}
FAKE_API const char *hipGetErrorString(int error) {
  const char *text = nullptr;
  return cuGetErrorString(error, &text) == kSuccess ? text : "unknown error";
}

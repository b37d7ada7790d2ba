//===- code_loader.cpp - Loading a code section into the process
//-----------===//
#include "code_loader.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <fcntl.h>
#include <mutex>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <vector>

#ifndef MFD_CLOEXEC
#define MFD_CLOEXEC 0x0001U
#endif
#ifndef MFD_ALLOW_SEALING
#define MFD_ALLOW_SEALING 0x0002U
#endif
#ifndef MFD_EXEC
#define MFD_EXEC 0x0010U
#endif

extern "C" void *mlirAsyncRuntimeCreateToken();

namespace sits::runtime {
namespace {

bool writeAll(int fd, const uint8_t *data, size_t size) {
  while (size) {
    ssize_t n = ::write(fd, data, size);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      return false;
    }
    data += n;
    size -= size_t(n);
  }
  return true;
}

int createMemfd(const std::string &label) {
#if defined(__linux__)
  std::string name = "sits:" + label;
  if (name.size() > 240)
    name.resize(240);
  // MFD_EXEC: kernels with vm.memfd_noexec=1 otherwise create
  // non-executable memfds; older kernels reject the flag (EINVAL).
  unsigned flags = MFD_CLOEXEC | MFD_ALLOW_SEALING;
  int fd = int(::syscall(SYS_memfd_create, name.c_str(), flags | MFD_EXEC));
  if (fd < 0 && errno == EINVAL)
    fd = int(::syscall(SYS_memfd_create, name.c_str(), flags));
  return fd;
#else
  (void)label;
  errno = ENOSYS;
  return -1;
#endif
}

std::string dlerrorString() {
  const char *e = dlerror();
  return e ? e : "unknown dynamic loader error";
}

} // namespace

Status promoteRuntimeToGlobalScope() {
  static std::once_flag once;
  static Status result;
  std::call_once(once, [] {
    Dl_info info;
    if (!dladdr(reinterpret_cast<void *>(&mlirAsyncRuntimeCreateToken),
                &info) ||
        !info.dli_fname) {
      result = Status(StatusCode::kInternal,
                      "cannot find the file SitsRuntime was loaded from");
      return;
    }
    // RTLD_NOLOAD: only re-flag the already-loaded library. The handle is
    // kept for the life of the process (SitsRuntime is in use anyway).
    void *self = dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_GLOBAL);
    if (!self && !dlsym(RTLD_DEFAULT, "mlirAsyncRuntimeCreateToken")) {
      result = Status(StatusCode::kInternal,
                      "cannot make the async runtime of " +
                          std::string(info.dli_fname) +
                          " visible to compiled code: " + dlerrorString());
      return;
    }
    dlerror();
  });
  return result;
}

StatusOr<std::unique_ptr<LoadedCode>>
LoadedCode::load(ByteSpan bytes, const std::string &label) {
  SITS_RETURN_IF_ERROR(promoteRuntimeToGlobalScope());
  std::unique_ptr<LoadedCode> code(new LoadedCode());

  std::string memfdError;
  int fd = createMemfd(label);
  if (fd >= 0) {
    if (!writeAll(fd, bytes.data, bytes.size)) {
      memfdError =
          std::string("writing the memfd failed: ") + std::strerror(errno);
      ::close(fd);
    } else {
      // Nobody, not even this process, can change the bytes from now on.
      (void)::fcntl(fd, F_ADD_SEALS,
                    F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL);
      std::string path = "/proc/self/fd/" + std::to_string(fd);
      dlerror();
      void *handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (handle) {
        code->handle_ = handle;
        code->fd_ = fd;
        code->path_ = path;
        code->method_ = "memfd";
        return code;
      }
      // No /proc, a noexec memfd policy, or a loader error about the object
      // itself: the temporary file below tells them apart.
      (void)dlerrorString();
      ::close(fd);
    }
  } else {
    memfdError = std::string("memfd_create failed: ") + std::strerror(errno);
  }

  // Fallback: a file in a fresh directory only this user can enter, removed
  // as soon as the loader has mapped it.
  const char *tmp = std::getenv("TMPDIR");
  std::string dirTemplate =
      std::string(tmp && *tmp ? tmp : "/tmp") + "/sits-code-XXXXXX";
  std::vector<char> dir(dirTemplate.begin(), dirTemplate.end());
  dir.push_back('\0');
  if (!::mkdtemp(dir.data()))
    return Status(StatusCode::kLoadFailed,
                  "cannot load compiled code: " + memfdError +
                      "; and no private temporary directory: " +
                      std::strerror(errno))
        .withSubject(label);
  std::string path = std::string(dir.data()) + "/code.so";
  int tfd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0500);
  bool written = tfd >= 0 && writeAll(tfd, bytes.data, bytes.size);
  int savedErrno = errno;
  if (tfd >= 0)
    ::close(tfd);
  void *handle = nullptr;
  std::string err;
  if (written) {
    dlerror();
    handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle)
      err = dlerrorString();
  } else {
    err =
        std::string("cannot write ") + path + ": " + std::strerror(savedErrno);
  }
  ::unlink(path.c_str());
  ::rmdir(dir.data());
  if (!handle)
    return Status(StatusCode::kLoadFailed,
                  "the dynamic loader refused the compiled code: " + err +
                      (memfdError.empty() ? std::string()
                                          : " (" + memfdError + ")"))
        .withSubject(label);
  code->handle_ = handle;
  code->path_ = path;
  code->method_ = "tempfile";
  return code;
}

LoadedCode::~LoadedCode() {
  if (handle_) {
    dlclose(handle_);
    // If the object is still loaded (something else holds it), keep its
    // memfd open so its /proc/self/fd name cannot be reused.
    if (fd_ >= 0) {
      void *still = dlopen(path_.c_str(), RTLD_NOW | RTLD_NOLOAD);
      if (still) {
        dlclose(still);
        return;
      }
    }
  }
  if (fd_ >= 0)
    ::close(fd_);
}

void *LoadedCode::symbol(const std::string &name) const {
  return handle_ ? dlsym(handle_, name.c_str()) : nullptr;
}

} // namespace sits::runtime

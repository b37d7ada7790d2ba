//===- fuzz_driver.cpp - Deterministic driver for the runtime's fuzz targets
//===//
//
// Runs a libFuzzer-style target (LLVMFuzzerTestOneInput) without libFuzzer,
// reproducibly, so that it can be a ctest test under ASan+UBSan:
//
//   <target> [--runs N] [--seed S] [--max-len BYTES] [--timeout-ms MS]
//            [--artifact-prefix PATH] [FILE|DIR ...]
//
//   1. every file given (directories: their regular files, sorted by name)
//      and the empty input run as they are;
//   2. N inputs are derived from them by mutation (the target's
//      LLVMFuzzerCustomMutator when it has one, else 1-4 stacked mutations
//      of fuzz_mutate.cpp or a splice of two inputs), each run from an
//      exactly sized heap copy so that ASan sees a read one past the end.
//
// The same --seed gives the same inputs. An input that crashes the target
// (a sanitizer report, a failed property, a signal) or runs longer than
// --timeout-ms is written to <artifact-prefix>crash-<run> (or -timeout-)
// before the process dies; pass that file alone to reproduce it. The last
// line says how many inputs ran.
//
//===----------------------------------------------------------------------===//
#include "fuzz_support.h"

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <fstream>
#include <memory>
#include <string>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

extern "C" {
// Optional target hooks, as in libFuzzer.
__attribute__((weak)) int LLVMFuzzerInitialize(int *argc, char ***argv);
__attribute__((weak)) size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size,
                                                     size_t maxSize,
                                                     unsigned int seed);
// Present when a sanitizer runtime is linked in: called before it dies.
__attribute__((weak)) void
__sanitizer_set_death_callback(void (*callback)(void));
}

namespace {

using sits::fuzz::Rng;

Rng *gMutateRng = nullptr;

// The input being run, for the crash handlers (async-signal-safe use only).
const uint8_t *gCurrent = nullptr;
size_t gCurrentSize = 0;
char gCrashPath[4096] = "";

void saveCurrentInput() {
  if (!gCurrent || !gCrashPath[0])
    return;
  int fd = ::open(gCrashPath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd >= 0) {
    size_t done = 0;
    while (done < gCurrentSize) {
      ssize_t n = ::write(fd, gCurrent + done, gCurrentSize - done);
      if (n <= 0)
        break;
      done += size_t(n);
    }
    ::close(fd);
    static const char kMsg[] = "fuzz driver: the input was saved to ";
    (void)!::write(2, kMsg, sizeof(kMsg) - 1);
    (void)!::write(2, gCrashPath, std::strlen(gCrashPath));
    (void)!::write(2, "\n", 1);
  }
  gCurrent = nullptr; // once
}

void onFatalSignal(int sig) {
  saveCurrentInput();
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

void installCrashHandlers() {
  if (__sanitizer_set_death_callback)
    __sanitizer_set_death_callback(saveCurrentInput);
  // SIGABRT: failed properties (and sanitizers with abort_on_error). The
  // memory-error signals are left to ASan when it is there (it reports them
  // and then calls the death callback).
  std::signal(SIGABRT, onFatalSignal);
  if (!__sanitizer_set_death_callback)
    for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL})
      std::signal(sig, onFatalSignal);
}

std::vector<uint8_t> readFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(in)),
                              std::istreambuf_iterator<char>());
}

bool isDirectory(const std::string &path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

std::vector<std::string> listFiles(const std::string &dir) {
  std::vector<std::string> out;
  if (DIR *d = ::opendir(dir.c_str())) {
    while (dirent *e = ::readdir(d)) {
      std::string path = dir + "/" + e->d_name;
      struct stat st;
      if (e->d_name[0] != '.' && ::stat(path.c_str(), &st) == 0 &&
          S_ISREG(st.st_mode))
        out.push_back(path);
    }
    ::closedir(d);
  }
  std::sort(out.begin(), out.end());
  return out;
}

struct Options {
  uint64_t runs = 10000;
  uint64_t seed = 1;
  size_t maxLen = 4096;
  double timeoutMs = 2000;
  std::string artifactPrefix;
  std::vector<std::string> paths;
};

[[noreturn]] void usage(const char *argv0) {
  std::fprintf(stderr,
               "usage: %s [--runs N] [--seed S] [--max-len BYTES] "
               "[--timeout-ms MS] [--artifact-prefix PATH] [FILE|DIR ...]\n",
               argv0);
  std::exit(2);
}

Options parseOptions(int argc, char **argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc)
        usage(argv[0]);
      return argv[++i];
    };
    if (a == "--runs")
      o.runs = std::strtoull(value().c_str(), nullptr, 10);
    else if (a == "--seed")
      o.seed = std::strtoull(value().c_str(), nullptr, 10);
    else if (a == "--max-len")
      o.maxLen = size_t(std::strtoull(value().c_str(), nullptr, 10));
    else if (a == "--timeout-ms")
      o.timeoutMs = std::strtod(value().c_str(), nullptr);
    else if (a == "--artifact-prefix")
      o.artifactPrefix = value();
    else if (a == "-h" || a == "--help")
      usage(argv[0]);
    else if (a.size() > 1 && a[0] == '-')
      usage(argv[0]);
    else
      o.paths.push_back(a);
  }
  if (o.maxLen == 0)
    o.maxLen = 1;
  return o;
}

} // namespace

extern "C" size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t maxSize) {
  static Rng fallback(12345);
  return sits::fuzz::mutateOnce(data, size, maxSize,
                                gMutateRng ? *gMutateRng : fallback);
}

int main(int argc, char **argv) {
  Options o = parseOptions(argc, argv);
  if (LLVMFuzzerInitialize)
    LLVMFuzzerInitialize(&argc, &argv);
  installCrashHandlers();

  std::vector<std::vector<uint8_t>> corpus;
  for (const std::string &p : o.paths) {
    if (isDirectory(p)) {
      for (const std::string &f : listFiles(p))
        corpus.push_back(readFile(f));
    } else {
      std::ifstream probe(p, std::ios::binary);
      if (!probe) {
        std::fprintf(stderr, "fuzz driver: cannot read %s\n", p.c_str());
        return 2;
      }
      corpus.push_back(readFile(p));
    }
  }

  Rng rng(o.seed);
  gMutateRng = &rng;
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  double slowestMs = 0;
  uint64_t ran = 0;

  auto runOne = [&](const std::vector<uint8_t> &input,
                    const std::string &label) {
    // An exact-size heap copy: reading past the end is an ASan report.
    std::unique_ptr<uint8_t[]> copy(
        new uint8_t[input.size() ? input.size() : 1]);
    if (!input.empty())
      std::memcpy(copy.get(), input.data(), input.size());
    std::snprintf(gCrashPath, sizeof(gCrashPath), "%scrash-%s",
                  o.artifactPrefix.c_str(), label.c_str());
    gCurrent = copy.get();
    gCurrentSize = input.size();
    const auto t0 = Clock::now();
    LLVMFuzzerTestOneInput(input.empty() ? nullptr : copy.get(), input.size());
    const double ms =
        std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    slowestMs = std::max(slowestMs, ms);
    ++ran;
    if (ms > o.timeoutMs) {
      std::snprintf(gCrashPath, sizeof(gCrashPath), "%stimeout-%s",
                    o.artifactPrefix.c_str(), label.c_str());
      std::fprintf(stderr,
                   "fuzz driver: input %s took %.0f ms (limit %.0f ms: "
                   "--timeout-ms)\n",
                   label.c_str(), ms, o.timeoutMs);
      saveCurrentInput();
      std::exit(1);
    }
    gCurrent = nullptr;
  };

  // 1. The corpus as it is, and the empty input.
  runOne({}, "empty");
  for (size_t i = 0; i < corpus.size(); ++i)
    runOne(corpus[i], "seed-" + std::to_string(i));

  // 2. Mutated inputs.
  std::vector<uint8_t> buf;
  for (uint64_t r = 0; r < o.runs; ++r) {
    const std::vector<uint8_t> empty;
    const std::vector<uint8_t> &base =
        corpus.empty() ? empty : corpus[rng.below(corpus.size())];
    size_t size = std::min(base.size(), o.maxLen);
    buf.assign(o.maxLen, 0);
    if (size)
      std::memcpy(buf.data(), base.data(), size);
    if (LLVMFuzzerCustomMutator) {
      size = LLVMFuzzerCustomMutator(buf.data(), size, o.maxLen,
                                     unsigned(rng.next()));
    } else if (corpus.size() > 1 && rng.oneIn(8)) {
      // Splice: a prefix of this input, a suffix of another.
      const std::vector<uint8_t> &other = corpus[rng.below(corpus.size())];
      size_t keep = rng.below(size + 1);
      size_t from = rng.below(other.size() + 1);
      size_t n = std::min(other.size() - from, o.maxLen - keep);
      if (n)
        std::memcpy(buf.data() + keep, other.data() + from, n);
      size = keep + n;
    } else {
      for (size_t k = 0, n = 1 + rng.below(4); k < n; ++k)
        size = LLVMFuzzerMutate(buf.data(), size, o.maxLen);
    }
    if (size > o.maxLen) {
      std::fprintf(stderr,
                   "fuzz driver: the mutator returned %zu > %zu bytes\n", size,
                   o.maxLen);
      return 1;
    }
    runOne(std::vector<uint8_t>(buf.begin(), buf.begin() + long(size)),
           "run-" + std::to_string(r));
  }

  const double seconds =
      std::chrono::duration<double>(Clock::now() - start).count();
  std::printf("fuzz driver: %llu inputs (%zu from the corpus, %llu mutated, "
              "seed %llu) in %.2f s, slowest %.1f ms: no crash, no property "
              "violated\n",
              (unsigned long long)ran, corpus.size() + 1,
              (unsigned long long)o.runs, (unsigned long long)o.seed, seconds,
              slowestMs);
  return 0;
}

//===- export.h - Symbol visibility of the SitsRuntime shared library -----===//
//
// SitsRuntime is built with hidden visibility; only what is marked
// SITS_RUNTIME_API (the C++ API) and the C ABI that compiled code imports
// (`mlirAsyncRuntime*`, `memrefCopy`) are exported. Keeping the export list
// short matters: the library promotes itself to the global symbol scope
// before it loads compiled code (see src/core/code_loader.cpp), and anything
// exported there can interpose on other libraries of the process.
//
//===----------------------------------------------------------------------===//
#ifndef SITS_RUNTIME_EXPORT_H
#define SITS_RUNTIME_EXPORT_H

#if defined(_WIN32)
#define SITS_RUNTIME_API
#else
#define SITS_RUNTIME_API __attribute__((visibility("default")))
#endif

#endif // SITS_RUNTIME_EXPORT_H

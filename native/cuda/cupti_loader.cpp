#include "cupti_loader.h"

#include <dlfcn.h>
#include <link.h>

#include <cstdlib>
#include <cstring>
#include <vector>

namespace rlscope::cuda {

namespace {

Cupti g_cupti;

// Path of a libcupti already mapped into the process, or "".
std::string loaded_cupti_path() {
  std::string found;
  dl_iterate_phdr(
      [](struct dl_phdr_info* info, size_t, void* out) -> int {
        const char* name = info->dlpi_name;
        const char* base = name ? std::strrchr(name, '/') : nullptr;
        base = base ? base + 1 : name;
        if (base && std::strncmp(base, "libcupti", 8) == 0 && std::strstr(base, ".so")) {
          *static_cast<std::string*>(out) = name;
          return 1;
        }
        return 0;
      },
      &found);
  return found;
}

void* try_open(const std::string& path, int extra_flags, std::string* where) {
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | extra_flags);
  if (h) *where = path;
  return h;
}

template <typename F>
bool sym(void* h, const char* name, F* out) {
  *out = reinterpret_cast<F>(dlsym(h, name));
  return *out != nullptr;
}

}  // namespace

const Cupti& cupti() { return g_cupti; }

std::string load_cupti(const std::string& explicit_path) {
  if (g_cupti.handle) return "";
  std::string where;
  void* h = nullptr;
  if (!explicit_path.empty()) {
    h = try_open(explicit_path, 0, &where);
    if (!h) {
      const char* e = dlerror();
      return "cannot load RLSCOPE_CUPTI_LIBRARY=" + explicit_path + " (" +
             (e ? e : "unknown error") + ")";
    }
  } else {
    for (const char* soname : {"libcupti.so.13", "libcupti.so"}) {
      if ((h = try_open(soname, RTLD_NOLOAD, &where))) break;
    }
    if (!h) {
      std::string loaded = loaded_cupti_path();
      if (!loaded.empty()) h = try_open(loaded, RTLD_NOLOAD, &where);
    }
    if (!h) h = try_open("libcupti.so.13", 0, &where);
    if (!h) {
      std::vector<std::string> dirs;
      for (const char* var : {"CUDA_HOME", "CUDA_PATH"}) {
        if (const char* v = std::getenv(var)) dirs.emplace_back(v);
      }
      dirs.emplace_back("/usr/local/cuda");
      for (const auto& d : dirs) {
        for (const char* sub : {"/extras/CUPTI/lib64/", "/lib64/", "/lib/"}) {
          if ((h = try_open(d + sub + "libcupti.so.13", 0, &where))) break;
        }
        if (h) break;
      }
    }
    if (!h) return "libcupti.so.13 not found (install the CUDA toolkit or set RLSCOPE_CUPTI_LIBRARY)";
  }
  dlerror();
  Cupti c;
  c.handle = h;
  c.path = where;
  bool ok = sym(h, "cuptiGetVersion", &c.GetVersion) &&
            sym(h, "cuptiGetResultString", &c.GetResultString) &&
            sym(h, "cuptiGetTimestamp", &c.GetTimestamp) &&
            sym(h, "cuptiSubscribe", &c.Subscribe) &&
            sym(h, "cuptiUnsubscribe", &c.Unsubscribe) &&
            sym(h, "cuptiEnableDomain", &c.EnableDomain) &&
            sym(h, "cuptiEnableCallback", &c.EnableCallback) &&
            sym(h, "cuptiGetCallbackName", &c.GetCallbackName) &&
            sym(h, "cuptiActivityEnable", &c.ActivityEnable) &&
            sym(h, "cuptiActivityRegisterCallbacks", &c.ActivityRegisterCallbacks) &&
            sym(h, "cuptiActivityGetNextRecord", &c.ActivityGetNextRecord) &&
            sym(h, "cuptiActivityGetNumDroppedRecords", &c.ActivityGetNumDroppedRecords) &&
            sym(h, "cuptiActivityFlushAll", &c.ActivityFlushAll);
  sym(h, "cuptiSubscribe_v2", &c.Subscribe_v2);  // optional
  if (!ok) return where + " lacks CUPTI functions rlscope needs (not a CUPTI 13 library?)";
  if (c.GetVersion(&c.version) != CUPTI_SUCCESS) c.version = 0;
  // Record layouts (CUpti_ActivityKernel10, ...) are those of CUPTI 13; newer
  // versions only append fields, older ones differ.
  if (c.version < 130000) {
    return where + " is CUPTI API version " + std::to_string(c.version) +
           "; rlscope needs CUPTI 13 (CUDA 13) or newer";
  }
  g_cupti = c;
  return "";
}

}  // namespace rlscope::cuda

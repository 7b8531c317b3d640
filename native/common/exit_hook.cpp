#include "exit_hook.h"

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <sys/mman.h>
#include <unistd.h>

namespace rlscope {
namespace {

std::atomic<ExitCallback> g_callback{nullptr};
std::atomic<bool> g_ran{false};

using ExitFn = void (*)(int);
ExitFn g_real_Exit = nullptr;
ExitFn g_real__exit = nullptr;
ExitFn g_real_exit = nullptr;

void run_callback_once() {
  if (g_ran.exchange(true)) return;
  ExitCallback cb = g_callback.load();
  if (cb) cb();
}

[[noreturn]] void hooked_Exit(int status) {
  run_callback_once();
  g_real_Exit(status);
  __builtin_unreachable();
}

[[noreturn]] void hooked__exit(int status) {
  run_callback_once();
  g_real__exit(status);
  __builtin_unreachable();
}

[[noreturn]] void hooked_exit(int status) {
  run_callback_once();
  g_real_exit(status);
  __builtin_unreachable();
}

#if defined(__x86_64__)
constexpr uint32_t kJumpSlot = R_X86_64_JUMP_SLOT;
constexpr uint32_t kGlobDat = R_X86_64_GLOB_DAT;
#elif defined(__aarch64__)
constexpr uint32_t kJumpSlot = R_AARCH64_JUMP_SLOT;
constexpr uint32_t kGlobDat = R_AARCH64_GLOB_DAT;
#else
constexpr uint32_t kJumpSlot = 0xffffffffu;  // other architectures: nothing patched
constexpr uint32_t kGlobDat = 0xffffffffu;
#endif

void* replacement(const char* name) {
  if (std::strcmp(name, "_Exit") == 0) return reinterpret_cast<void*>(&hooked_Exit);
  if (std::strcmp(name, "_exit") == 0) return reinterpret_cast<void*>(&hooked__exit);
  if (std::strcmp(name, "exit") == 0) return reinterpret_cast<void*>(&hooked_exit);
  return nullptr;
}

struct Search {
  const char* substring;
  int patched;
};

// Dynamic-section addresses are relocated in place by glibc on most architectures;
// where they are not, they are offsets from the load address.
uintptr_t address(const dl_phdr_info* info, ElfW(Addr) p) {
  return p < info->dlpi_addr ? info->dlpi_addr + p : p;
}

bool in_relro(const dl_phdr_info* info, uintptr_t a) {
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_GNU_RELRO) continue;
    uintptr_t lo = info->dlpi_addr + ph.p_vaddr;
    if (a >= lo && a < lo + ph.p_memsz) return true;
  }
  return false;
}

bool write_slot(const dl_phdr_info* info, void** slot, void* value) {
  long page = sysconf(_SC_PAGESIZE);
  uintptr_t start = reinterpret_cast<uintptr_t>(slot) & ~uintptr_t(page - 1);
  bool relro = in_relro(info, reinterpret_cast<uintptr_t>(slot));
  if (relro && mprotect(reinterpret_cast<void*>(start), size_t(page),
                        PROT_READ | PROT_WRITE) != 0) {
    return false;
  }
  __atomic_store_n(slot, value, __ATOMIC_SEQ_CST);
  if (relro) mprotect(reinterpret_cast<void*>(start), size_t(page), PROT_READ);
  return true;
}

int patch_relocations(const dl_phdr_info* info, const ElfW(Rela)* rel, size_t bytes,
                      const ElfW(Sym)* symtab, const char* strtab) {
  int n = 0;
  for (size_t i = 0; i < bytes / sizeof(ElfW(Rela)); ++i) {
    uint32_t type = uint32_t(ELF64_R_TYPE(rel[i].r_info));
    if (type != kJumpSlot && type != kGlobDat) continue;
    const char* name = strtab + symtab[ELF64_R_SYM(rel[i].r_info)].st_name;
    void* hook = replacement(name);
    if (!hook) continue;
    void** slot = reinterpret_cast<void**>(info->dlpi_addr + rel[i].r_offset);
    if (*slot == hook) continue;
    if (write_slot(info, slot, hook)) ++n;
  }
  return n;
}

int visit(dl_phdr_info* info, size_t, void* data) {
  auto* s = static_cast<Search*>(data);
  if (!info->dlpi_name || !std::strstr(info->dlpi_name, s->substring)) return 0;
  const ElfW(Dyn)* dyn = nullptr;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    if (info->dlpi_phdr[i].p_type == PT_DYNAMIC) {
      dyn = reinterpret_cast<const ElfW(Dyn)*>(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
    }
  }
  if (!dyn) return 0;
  const ElfW(Rela)* jmprel = nullptr;
  const ElfW(Rela)* rela = nullptr;
  size_t jmprel_size = 0, rela_size = 0;
  const ElfW(Sym)* symtab = nullptr;
  const char* strtab = nullptr;
  bool pltrel_is_rela = true;
  for (const ElfW(Dyn)* d = dyn; d->d_tag != DT_NULL; ++d) {
    switch (d->d_tag) {
      case DT_JMPREL: jmprel = reinterpret_cast<const ElfW(Rela)*>(address(info, d->d_un.d_ptr)); break;
      case DT_PLTRELSZ: jmprel_size = d->d_un.d_val; break;
      case DT_PLTREL: pltrel_is_rela = d->d_un.d_val == DT_RELA; break;
      case DT_RELA: rela = reinterpret_cast<const ElfW(Rela)*>(address(info, d->d_un.d_ptr)); break;
      case DT_RELASZ: rela_size = d->d_un.d_val; break;
      case DT_SYMTAB: symtab = reinterpret_cast<const ElfW(Sym)*>(address(info, d->d_un.d_ptr)); break;
      case DT_STRTAB: strtab = reinterpret_cast<const char*>(address(info, d->d_un.d_ptr)); break;
      default: break;
    }
  }
  if (!symtab || !strtab) return 0;
  if (jmprel && pltrel_is_rela) s->patched += patch_relocations(info, jmprel, jmprel_size, symtab, strtab);
  if (rela) s->patched += patch_relocations(info, rela, rela_size, symtab, strtab);  // -fno-plt
  return 0;
}

}  // namespace

int hook_exit_calls(const char* library_substring, ExitCallback callback) {
  if (!library_substring || !*library_substring || !callback) return -1;
  if (!g_real_Exit) {
    g_real_Exit = reinterpret_cast<ExitFn>(dlsym(RTLD_DEFAULT, "_Exit"));
    g_real__exit = reinterpret_cast<ExitFn>(dlsym(RTLD_DEFAULT, "_exit"));
    g_real_exit = reinterpret_cast<ExitFn>(dlsym(RTLD_DEFAULT, "exit"));
    if (!g_real_Exit || !g_real__exit || !g_real_exit) return 0;
  }
  g_callback.store(callback);
  Search s{library_substring, 0};
  dl_iterate_phdr(visit, &s);
  return s.patched;
}

}  // namespace rlscope

// A fake libnvidia-ml.so.1 for tests without a GPU: the NVML calls rls-prof's
// sampler makes (rlscope/launch/nvml.py) and those nvidia-ml-py makes for the
// same readings, returning values scripted by the environment:
//   FAKE_NVML_DEVICES      number of GPUs (default 1)
//   FAKE_NVML_UTIL         utilisation % per device, ';' between devices, ','
//                          between successive readings (cycled), e.g. "90;5,0"
//   FAKE_NVML_MEMORY_UTIL  same, memory utilisation %
//   FAKE_NVML_MEMORY_USED  same, memory used (bytes)
//   FAKE_NVML_SM_CLOCK     same, SM clock (MHz)
//   FAKE_NVML_INIT_RESULT  nvmlInit's return code (e.g. 9: driver not loaded)
//   FAKE_NVML_LOG          a file: one line per utilisation reading
//                          ("<device> <util>"), so a test knows what was read
//   FAKE_NVML_GPM          GPM support per device (1/0, ';' between devices;
//                          default 0: no GPM, as before Hopper)
//   FAKE_NVML_GPM_SM_UTIL, FAKE_NVML_GPM_SM_OCCUPANCY, FAKE_NVML_GPM_GRAPHICS_UTIL
//                          GPM metric values in hundredths of a percent, scripted as
//                          above; one value per nvmlGpmMetricsGet of the device
//   FAKE_NVML_GPM_FAIL     a metric id whose nvmlReturn in nvmlGpmMetricsGet is
//                          NOT_SUPPORTED (the metric cannot be computed)
// No nvml.h here (the CUDA toolkit does not ship it): the declarations follow
// NVML's documented C API.
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))

typedef int nvmlReturn_t;
typedef struct Dev* nvmlDevice_t;
typedef struct {
  unsigned int gpu, memory;
} nvmlUtilization_t;
typedef struct {
  unsigned long long total, free, used;
} nvmlMemory_t;

// GPM (nvmlGpm*): an opaque sample handle, the metric struct and its request, laid
// out as NVML documents them; the fake's sample records its device and a counter.
typedef struct GpmSample {
  int device;
  unsigned long long seq;
}* nvmlGpmSample_t;
typedef struct {
  char *shortName, *longName, *unit;
} gpmMetricInfo_t;
typedef struct {
  unsigned int metricId;
  nvmlReturn_t nvmlReturn;
  double value;
  gpmMetricInfo_t metricInfo;
} nvmlGpmMetric_t;
#define GPM_MAX_METRICS 210
typedef struct {
  unsigned int version;
  unsigned int numMetrics;
  nvmlGpmSample_t sample1, sample2;
  nvmlGpmMetric_t metrics[GPM_MAX_METRICS];
} nvmlGpmMetricsGet_t;
typedef struct {
  unsigned int version;
  unsigned int isSupportedDevice;
} nvmlGpmSupport_t;

enum { OK = 0, UNINITIALIZED = 1, INVALID_ARGUMENT = 2, NOT_SUPPORTED = 3 };
#define MAX_DEV 16
#define MAX_VALS 64

struct Script {
  unsigned long long v[MAX_DEV][MAX_VALS];
  int n[MAX_DEV];
  int next[MAX_DEV];
};
struct Dev {
  int index;
};

static struct Dev g_dev[MAX_DEV];
static int g_inited = 0;
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static struct Script g_util, g_mem_util, g_mem_used, g_clock;
static struct Script g_gpm, g_gpm_sm, g_gpm_occ, g_gpm_gfx;
static unsigned long long g_gpm_seq = 0;

static int devices(void) {
  const char* s = getenv("FAKE_NVML_DEVICES");
  int n = s ? atoi(s) : 1;
  return n < 0 ? 0 : n > MAX_DEV ? MAX_DEV : n;
}

static void parse(struct Script* sc, const char* var, unsigned long long dflt) {
  memset(sc, 0, sizeof *sc);
  const char* s = getenv(var);
  for (int d = 0; d < MAX_DEV; ++d) {
    sc->v[d][0] = dflt;
    sc->n[d] = 1;
  }
  if (!s) return;
  int d = 0, k = 0;
  char* end;
  while (*s && d < MAX_DEV) {
    unsigned long long x = strtoull(s, &end, 10);
    if (end == s) break;
    if (k < MAX_VALS) sc->v[d][k++] = x;
    sc->n[d] = k;
    s = end;
    if (*s == ',') {
      ++s;
    } else if (*s == ';') {
      ++s;
      ++d;
      k = 0;
    }
  }
  // Devices not scripted repeat the last scripted one.
  for (int e = d + 1; e < MAX_DEV; ++e) {
    memcpy(sc->v[e], sc->v[d], sizeof sc->v[d]);
    sc->n[e] = sc->n[d];
  }
}

static unsigned long long next_value(struct Script* sc, int d) {
  unsigned long long x = sc->v[d][sc->next[d] % sc->n[d]];
  sc->next[d]++;
  return x;
}

static int index_of(nvmlDevice_t dev) {
  if (!g_inited || !dev || dev < g_dev || dev >= g_dev + devices()) return -1;
  return dev->index;
}

EXPORT nvmlReturn_t nvmlInitWithFlags(unsigned int flags) {
  (void)flags;
  const char* r = getenv("FAKE_NVML_INIT_RESULT");
  if (r && atoi(r) != 0) return atoi(r);
  pthread_mutex_lock(&g_mu);
  if (!g_inited) {
    for (int i = 0; i < MAX_DEV; ++i) g_dev[i].index = i;
    parse(&g_util, "FAKE_NVML_UTIL", 0);
    parse(&g_mem_util, "FAKE_NVML_MEMORY_UTIL", 0);
    parse(&g_mem_used, "FAKE_NVML_MEMORY_USED", 1ull << 30);
    parse(&g_clock, "FAKE_NVML_SM_CLOCK", 1410);
    parse(&g_gpm, "FAKE_NVML_GPM", 0);
    parse(&g_gpm_sm, "FAKE_NVML_GPM_SM_UTIL", 0);
    parse(&g_gpm_occ, "FAKE_NVML_GPM_SM_OCCUPANCY", 0);
    parse(&g_gpm_gfx, "FAKE_NVML_GPM_GRAPHICS_UTIL", 0);
  }
  ++g_inited;
  pthread_mutex_unlock(&g_mu);
  return OK;
}

EXPORT nvmlReturn_t nvmlInit_v2(void) { return nvmlInitWithFlags(0); }

EXPORT nvmlReturn_t nvmlShutdown(void) {
  pthread_mutex_lock(&g_mu);
  int was = g_inited;
  if (g_inited) --g_inited;
  pthread_mutex_unlock(&g_mu);
  return was ? OK : UNINITIALIZED;
}

EXPORT const char* nvmlErrorString(nvmlReturn_t r) {
  switch (r) {
    case OK: return "Success";
    case UNINITIALIZED: return "Uninitialized";
    case INVALID_ARGUMENT: return "Invalid Argument";
    case NOT_SUPPORTED: return "Not Supported";
    case 9: return "Driver Not Loaded";
    default: return "Unknown Error";
  }
}

EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* count) {
  if (!g_inited) return UNINITIALIZED;
  *count = (unsigned)devices();
  return OK;
}

EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int i, nvmlDevice_t* dev) {
  if (!g_inited) return UNINITIALIZED;
  if ((int)i >= devices()) return INVALID_ARGUMENT;
  *dev = &g_dev[i];
  return OK;
}

EXPORT nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t dev, char* name, unsigned int len) {
  int d = index_of(dev);
  if (d < 0) return INVALID_ARGUMENT;
  snprintf(name, len, "Fake GPU %d", d);
  return OK;
}

EXPORT nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t dev, char* uuid, unsigned int len) {
  int d = index_of(dev);
  if (d < 0) return INVALID_ARGUMENT;
  snprintf(uuid, len, "GPU-fake-%04d", d);
  return OK;
}

EXPORT nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t dev, nvmlUtilization_t* u) {
  int d = index_of(dev);
  if (d < 0) return INVALID_ARGUMENT;
  pthread_mutex_lock(&g_mu);
  u->gpu = (unsigned)next_value(&g_util, d);
  u->memory = (unsigned)next_value(&g_mem_util, d);
  pthread_mutex_unlock(&g_mu);
  const char* log = getenv("FAKE_NVML_LOG");
  if (log) {
    FILE* f = fopen(log, "a");
    if (f) {
      fprintf(f, "%d %u\n", d, u->gpu);
      fclose(f);
    }
  }
  return OK;
}

EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t dev, nvmlMemory_t* m) {
  int d = index_of(dev);
  if (d < 0) return INVALID_ARGUMENT;
  pthread_mutex_lock(&g_mu);
  m->total = 80ull << 30;
  m->used = next_value(&g_mem_used, d);
  m->free = m->total > m->used ? m->total - m->used : 0;
  pthread_mutex_unlock(&g_mu);
  return OK;
}

EXPORT nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t dev, int type, unsigned int* clock) {
  int d = index_of(dev);
  if (d < 0) return INVALID_ARGUMENT;
  if (type != 1) return NOT_SUPPORTED;  // NVML_CLOCK_SM only
  pthread_mutex_lock(&g_mu);
  *clock = (unsigned)next_value(&g_clock, d);
  pthread_mutex_unlock(&g_mu);
  return OK;
}

// ---- GPM ----------------------------------------------------------------------------
enum { GPM_GRAPHICS_UTIL = 1, GPM_SM_UTIL = 2, GPM_SM_OCCUPANCY = 3 };

EXPORT nvmlReturn_t nvmlGpmQueryDeviceSupport(nvmlDevice_t dev, nvmlGpmSupport_t* s) {
  int d = index_of(dev);
  if (d < 0 || !s) return INVALID_ARGUMENT;
  if (s->version != 1) return 25;  // NVML_ERROR_ARGUMENT_VERSION_MISMATCH
  s->isSupportedDevice = g_gpm.v[d][0] != 0;
  return OK;
}

EXPORT nvmlReturn_t nvmlGpmSampleAlloc(nvmlGpmSample_t* out) {
  if (!out) return INVALID_ARGUMENT;
  *out = calloc(1, sizeof **out);
  if (!*out) return 20;  // NVML_ERROR_MEMORY
  (*out)->device = -1;
  return OK;
}

EXPORT nvmlReturn_t nvmlGpmSampleFree(nvmlGpmSample_t s) {
  free(s);
  return OK;
}

EXPORT nvmlReturn_t nvmlGpmSampleGet(nvmlDevice_t dev, nvmlGpmSample_t s) {
  int d = index_of(dev);
  if (d < 0 || !s) return INVALID_ARGUMENT;
  if (!g_gpm.v[d][0]) return NOT_SUPPORTED;
  pthread_mutex_lock(&g_mu);
  s->device = d;
  s->seq = ++g_gpm_seq;
  pthread_mutex_unlock(&g_mu);
  return OK;
}

EXPORT nvmlReturn_t nvmlGpmMetricsGet(nvmlGpmMetricsGet_t* g) {
  if (!g || !g_inited) return UNINITIALIZED;
  if (g->version != 1) return 25;
  if (!g->sample1 || !g->sample2 || g->numMetrics > GPM_MAX_METRICS) return INVALID_ARGUMENT;
  int d = g->sample1->device;
  // Two samples of one device, the first taken before the second.
  if (d < 0 || d != g->sample2->device || g->sample1->seq >= g->sample2->seq)
    return INVALID_ARGUMENT;
  const char* fail = getenv("FAKE_NVML_GPM_FAIL");
  unsigned int failing = fail ? (unsigned)atoi(fail) : 0;
  pthread_mutex_lock(&g_mu);
  double sm = next_value(&g_gpm_sm, d) / 100.0, occ = next_value(&g_gpm_occ, d) / 100.0,
         gfx = next_value(&g_gpm_gfx, d) / 100.0;
  pthread_mutex_unlock(&g_mu);
  for (unsigned int i = 0; i < g->numMetrics; ++i) {
    nvmlGpmMetric_t* m = &g->metrics[i];
    m->nvmlReturn = OK;
    m->metricInfo.shortName = m->metricInfo.longName = m->metricInfo.unit = NULL;
    switch (m->metricId) {
      case GPM_SM_UTIL: m->value = sm; break;
      case GPM_SM_OCCUPANCY: m->value = occ; break;
      case GPM_GRAPHICS_UTIL: m->value = gfx; break;
      default: m->value = 0; m->nvmlReturn = NOT_SUPPORTED;
    }
    if (m->metricId == failing) m->nvmlReturn = NOT_SUPPORTED;
  }
  return OK;
}

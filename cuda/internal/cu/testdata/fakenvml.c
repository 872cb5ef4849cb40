// fakenvml.c: a stand-in libnvidia-ml.so.1 for testing package cu without a GPU: one
// device at PCI bus id 0000:01:00.0 (also accepted as 00000000:01:00.0, any case),
// 42% GPU and 7% memory utilization, 80 GiB of which 1 GiB used.
//
// Build: gcc -shared -fPIC -Wl,-soname,libnvidia-ml.so.1 -o libnvidia-ml.so.1 fakenvml.c

#include <stdio.h>
#include <string.h>
#include <strings.h>

typedef int nvmlReturn_t;
typedef struct fake_device *nvmlDevice_t;
typedef struct {
    unsigned gpu, memory;
} nvmlUtilization_t;
typedef struct {
    unsigned long long total, free, used;
} nvmlMemory_t;

struct fake_device {
    int id;
};
static struct fake_device dev0;
static int initialized;

nvmlReturn_t nvmlInit_v2(void) {
    initialized = 1;
    return 0;
}

const char *nvmlErrorString(nvmlReturn_t rc) {
    switch (rc) {
    case 0: return "Success";
    case 1: return "Uninitialized";
    case 2: return "Invalid Argument";
    case 6: return "Not Found";
    case 7: return "Insufficient Size";
    }
    return "Unknown Error";
}

nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char *bus, nvmlDevice_t *d) {
    if (!initialized) return 1;
    if (!bus || !d) return 2;
    if (strcasecmp(bus, "0000:01:00.0") != 0 && strcasecmp(bus, "00000000:01:00.0") != 0) return 6;
    *d = &dev0;
    return 0;
}

nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t d, nvmlUtilization_t *u) {
    if (!initialized) return 1;
    if (d != &dev0 || !u) return 2;
    u->gpu = 42;
    u->memory = 7;
    return 0;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t d, nvmlMemory_t *m) {
    if (!initialized) return 1;
    if (d != &dev0 || !m) return 2;
    m->total = 80ull << 30;
    m->used = 1ull << 30;
    m->free = m->total - m->used;
    return 0;
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t d, char *name, unsigned len) {
    if (!initialized) return 1;
    if (d != &dev0 || !name) return 2;
    if (len < 17) return 7;
    snprintf(name, len, "%s", "Fake CUDA Device");
    return 0;
}

nvmlReturn_t nvmlSystemGetDriverVersion(char *v, unsigned len) {
    if (!initialized) return 1;
    snprintf(v, len, "%s", "999.99");
    return 0;
}

// fakenvrtc.c: a stand-in libnvrtc.so.13 for testing package cu without the CUDA
// toolkit. It "compiles" by checking its inputs: a source containing "#error" fails
// with NVRTC_ERROR_COMPILATION, an #include "x" with no header x fails like NVRTC, an
// option not starting with '-' is NVRTC_ERROR_INVALID_OPTION. The log lists the
// architecture, the headers and the options it saw. The CUBIN (real architectures
// only) is "\x7fELFFAKECUBIN <arch> <name>", the PTX "// fake PTX\n.target <arch>\n" and
// the source: images fakecuda.c loads.
//
// Build: gcc -shared -fPIC -Wl,-soname,libnvrtc.so.13 -o libnvrtc.so.13 fakenvrtc.c
// With -DFAKE_BUILTINS it is a stand-in libnvrtc-builtins.so.13.0 (one marker symbol).

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef FAKE_BUILTINS
int fake_nvrtc_builtins_marker(void) { return 13; }
#else

typedef int nvrtcResult;

struct prog {
    char *src, *name, *log, *cubin, *ptx;
    size_t cubin_size;
    int nheaders;
    char **headers, **names;
};
typedef struct prog *nvrtcProgram;

static const char *names[] = {
    "NVRTC_SUCCESS",
    "NVRTC_ERROR_OUT_OF_MEMORY",
    "NVRTC_ERROR_PROGRAM_CREATION_FAILURE",
    "NVRTC_ERROR_INVALID_INPUT",
    "NVRTC_ERROR_INVALID_PROGRAM",
    "NVRTC_ERROR_INVALID_OPTION",
    "NVRTC_ERROR_COMPILATION",
    "NVRTC_ERROR_BUILTIN_OPERATION_FAILURE",
};

const char *nvrtcGetErrorString(nvrtcResult rc) {
    if (rc >= 0 && rc < (int)(sizeof names / sizeof names[0])) return names[rc];
    return "NVRTC_ERROR unknown";
}

nvrtcResult nvrtcVersion(int *major, int *minor) {
    *major = 13;
    *minor = 0;
    return 0;
}

nvrtcResult nvrtcCreateProgram(nvrtcProgram *p, const char *src, const char *name, int n, const char *const *headers,
                               const char *const *includeNames) {
    if (!p || !src || n < 0 || (n > 0 && (!headers || !includeNames))) return 3;
    struct prog *q = calloc(1, sizeof *q);
    q->src = strdup(src);
    q->name = strdup(name ? name : "default_program");
    q->nheaders = n;
    q->headers = calloc((size_t)n + 1, sizeof(char *));
    q->names = calloc((size_t)n + 1, sizeof(char *));
    for (int i = 0; i < n; i++) {
        if (!headers[i] || !includeNames[i]) return 3;
        q->headers[i] = strdup(headers[i]);
        q->names[i] = strdup(includeNames[i]);
    }
    *p = q;
    return 0;
}

static void logf_(struct prog *q, const char *fmt, const char *a, const char *b) {
    char line[1024];
    snprintf(line, sizeof line, fmt, a, b);
    size_t old = q->log ? strlen(q->log) : 0;
    q->log = realloc(q->log, old + strlen(line) + 1);
    strcpy(q->log + old, line);
}

nvrtcResult nvrtcCompileProgram(nvrtcProgram q, int n, const char *const *opts) {
    if (!q) return 4;
    const char *arch = "compute_75";
    for (int i = 0; i < n; i++) {
        if (!opts || !opts[i]) return 3;
        if (opts[i][0] != '-') return 5;
        logf_(q, "option %s%s\n", opts[i], "");
        if (strncmp(opts[i], "--gpu-architecture=", 19) == 0) arch = opts[i] + 19;
        else if (strncmp(opts[i], "-arch=", 6) == 0) arch = opts[i] + 6;
    }
    for (int i = 0; i < q->nheaders; i++) logf_(q, "header %s: %s\n", q->names[i], q->headers[i]);
    if (strstr(q->src, "#error")) {
        logf_(q, "%s(1): error: #error directive: %s\n", q->name, "fake failure");
        return 6;
    }
    for (const char *s = strstr(q->src, "#include \""); s; s = strstr(s + 1, "#include \"")) {
        const char *b = s + 10, *e = strchr(b, '"');
        if (!e) break;
        int found = 0;
        for (int i = 0; i < q->nheaders; i++)
            if (strlen(q->names[i]) == (size_t)(e - b) && strncmp(q->names[i], b, (size_t)(e - b)) == 0) found = 1;
        if (!found) {
            char inc[256];
            snprintf(inc, sizeof inc, "%.*s", (int)(e - b), b);
            logf_(q, "%s(1): catastrophic error: cannot open source file \"%s\"\n", q->name, inc);
            return 6;
        }
    }
    logf_(q, "compiled %s for %s\n", q->name, arch);
    if (strncmp(arch, "sm_", 3) == 0) {
        size_t len = 64 + strlen(arch) + strlen(q->name);
        q->cubin = malloc(len);
        q->cubin_size = (size_t)snprintf(q->cubin, len, "\x7f" "ELFFAKECUBIN %s %s", arch, q->name);
    }
    size_t len = 64 + strlen(arch) + strlen(q->src);
    q->ptx = malloc(len);
    snprintf(q->ptx, len, "// fake PTX\n.target %s\n%s", arch, q->src);
    return 0;
}

nvrtcResult nvrtcGetProgramLogSize(nvrtcProgram q, size_t *n) {
    *n = (q->log ? strlen(q->log) : 0) + 1;
    return 0;
}

nvrtcResult nvrtcGetProgramLog(nvrtcProgram q, char *buf) {
    strcpy(buf, q->log ? q->log : "");
    return 0;
}

nvrtcResult nvrtcGetCUBINSize(nvrtcProgram q, size_t *n) {
    *n = q->cubin ? q->cubin_size : 0;
    return 0;
}

nvrtcResult nvrtcGetCUBIN(nvrtcProgram q, char *buf) {
    if (!q->cubin) return 3;
    memcpy(buf, q->cubin, q->cubin_size);
    return 0;
}

nvrtcResult nvrtcGetPTXSize(nvrtcProgram q, size_t *n) {
    if (!q->ptx) return 4;
    *n = strlen(q->ptx) + 1;
    return 0;
}

nvrtcResult nvrtcGetPTX(nvrtcProgram q, char *buf) {
    if (!q->ptx) return 4;
    strcpy(buf, q->ptx);
    return 0;
}

nvrtcResult nvrtcDestroyProgram(nvrtcProgram *p) {
    if (!p || !*p) return 4;
    struct prog *q = *p;
    for (int i = 0; i < q->nheaders; i++) {
        free(q->headers[i]);
        free(q->names[i]);
    }
    free(q->headers);
    free(q->names);
    free(q->src);
    free(q->name);
    free(q->log);
    free(q->cubin);
    free(q->ptx);
    free(q);
    *p = NULL;
    return 0;
}
#endif

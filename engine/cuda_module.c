// Loading the CUDA module (engine/cuda_module.h).
#include "engine/cuda_module.h"

#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/common.h"
#include "base/env.h"

static const zt_cuda_module *g_linked;  // registered by CUDA code linked into this program
static const zt_cuda_module *g_mod;
static int g_tried;
static char g_why[4096];
static char g_path[PATH_MAX + 64];  // the loaded module's file (absolute, symlinks resolved)
static char g_fail[ZT_ERR_MAX];     // the load's error message, repeated by every later call

static const zt_cuda_module *check(const zt_cuda_module *m, const char *where) {
    if (m->api_version != ZT_CUDA_MODULE_API) {  // nothing else of another version's table is read
        snprintf(g_why + strlen(g_why), sizeof g_why - strlen(g_why),
                 "\n  %s: built for another zerotrain (module API %d; this executable %s, API %d): rebuild both",
                 where, m->api_version, ZT_VERSION, ZT_CUDA_MODULE_API);
        return NULL;
    }
    if (strcmp(m->version, ZT_VERSION)) {
        snprintf(g_why + strlen(g_why), sizeof g_why - strlen(g_why),
                 "\n  %s: built for another zerotrain (module %s, API %d; this executable %s): rebuild both", where,
                 m->version, m->api_version, ZT_VERSION);
        return NULL;
    }
    return m;
}

static int g_found;   // a candidate file exists (else: not built or not installed)
static int g_dl_err;  // dlopen itself failed (a library the module needs, most likely)

static const char *file_kind(mode_t m) {
    if (S_ISFIFO(m)) return "a FIFO (named pipe)";
    if (S_ISDIR(m)) return "a directory";
    if (S_ISCHR(m)) return "a character device";
    if (S_ISBLK(m)) return "a block device";
    if (S_ISSOCK(m)) return "a socket";
    return "a special file";
}

// The machine this executable was built for, as an ELF header names it (0: not checked).
#if defined(__x86_64__)
#define HOST_MACHINE EM_X86_64
#elif defined(__aarch64__)
#define HOST_MACHINE EM_AARCH64
#elif defined(__powerpc64__)
#define HOST_MACHINE EM_PPC64
#else
#define HOST_MACHINE 0
#endif
#define HOST_CLASS (sizeof(void *) == 8 ? ELFCLASS64 : ELFCLASS32)

static const char *machine_name(unsigned m) {
    switch (m) {
    case EM_386: return "i386";
    case EM_X86_64: return "x86-64";
    case EM_ARM: return "32-bit ARM";
    case EM_AARCH64: return "AArch64";
    case EM_PPC64: return "PowerPC64";
    case EM_RISCV: return "RISC-V";
    case EM_S390: return "s390";
    default: return "another machine";
    }
}

// Whether `path` may be handed to dlopen: a regular file (or a symlink to one: dlopen of a
// FIFO blocks in open), and, when it is an ELF file, one for this machine and word size.
// glibc reports an ELF file for another machine as "No such file or directory" (it skips
// such a file while searching a path list), so that is said here instead. Opened with
// O_NONBLOCK and checked again on the open descriptor, so a FIFO swapped in cannot block.
// 0, or -1 with the reason in `why`.
static int check_file(const char *path, char *why, size_t n) {
    struct stat st;
    if (stat(path, &st) != 0) {
        snprintf(why, n, "%s", errno == ENOENT ? "no such file" : strerror(errno));
        return -1;
    }
    g_found = 1;
    if (!S_ISREG(st.st_mode)) {
        snprintf(why, n, "is %s, not a regular file: the CUDA module must be its shared-object file",
                 file_kind(st.st_mode));
        return -1;
    }
    const int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        snprintf(why, n, "%s", fd < 0 ? strerror(errno) : "changed while it was being checked");
        if (fd >= 0) close(fd);
        return -1;
    }
    unsigned char h[EI_NIDENT + 4] = {0};
    const ssize_t got = read(fd, h, sizeof h);
    close(fd);
    if (got < (ssize_t)sizeof h || memcmp(h, ELFMAG, SELFMAG)) return 0;  // not ELF: dlopen says why
    if ((h[EI_CLASS] == ELFCLASS32 || h[EI_CLASS] == ELFCLASS64) && h[EI_CLASS] != HOST_CLASS) {
        const int bits = h[EI_CLASS] == ELFCLASS32 ? 32 : 64;
        snprintf(why, n, "a %d-bit ELF file (ELFCLASS%d); this zerotrain is %d-bit", bits, bits,
                 HOST_CLASS == ELFCLASS64 ? 64 : 32);
        return -1;
    }
    const int little = h[EI_DATA] == ELFDATA2LSB;
    const unsigned machine = little ? h[EI_NIDENT + 2] | h[EI_NIDENT + 3] << 8 : h[EI_NIDENT + 2] << 8 | h[EI_NIDENT + 3];
    if (HOST_MACHINE && machine != HOST_MACHINE) {
        snprintf(why, n, "an ELF file built for %s (e_machine %u); this zerotrain runs on %s (e_machine %d): "
                 "install the module built with this executable",
                 machine_name(machine), machine, machine_name(HOST_MACHINE), HOST_MACHINE);
        return -1;
    }
    return 0;
}

// A place the module is looked for: the file opened (absolute, symlinks resolved when it
// exists) and how messages name it ($ZT_CUDA_MODULE as given; a relative one with its file).
typedef struct {
    char path[PATH_MAX + 64];
    char label[2 * PATH_MAX + 160];
} candidate;

static const zt_cuda_module *try_open(const candidate *c) {
    const char *path = c->path;
    size_t n = strlen(g_why);
    char why[512];
    if (check_file(path, why, sizeof why) != 0) {
        snprintf(g_why + n, sizeof g_why - n, "\n  %.1500s: %s", c->label, why);
        return NULL;
    }
    const zt_cuda_module *linked = g_linked;
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    g_linked = linked;  // its constructor's registration: the table comes from its entry point below
    if (!h) {
        g_dl_err = 1;
        snprintf(g_why + n, sizeof g_why - n, "\n  %.1500s: %.1024s", c->label, dlerror());
        return NULL;
    }
    const zt_cuda_module *(*entry)(void) = (const zt_cuda_module *(*)(void))dlsym(h, "zt_cuda_module_entry");
    if (!entry) {
        snprintf(g_why + n, sizeof g_why - n, "\n  %.1500s: no zt_cuda_module_entry (not a zerotrain CUDA module)",
                 c->label);
        dlclose(h);
        return NULL;
    }
    const zt_cuda_module *m = check(entry(), c->label);
    if (!m) dlclose(h);
    else snprintf(g_path, sizeof g_path, "%.*s", (int)sizeof g_path - 1, path);
    return m;
}

// `path` made absolute with symlinks resolved (dlopen searches the library path for a name
// without a slash, and the module's line should say which file it is); else as given.
static void resolve(char *out, size_t n, const char *path) {
    char real[PATH_MAX], cwd[PATH_MAX];
    if (realpath(path, real)) snprintf(out, n, "%s", real);
    else if (path[0] != '/' && getcwd(cwd, sizeof cwd)) snprintf(out, n, "%s/%s", cwd, path);
    else snprintf(out, n, "%s", path);
}

// Where the module is looked for, in order: $ZT_CUDA_MODULE alone when set; else beside the
// executable, then ../lib/zerotrain/ beside it. Never the build directory: an installed
// zerotrain must not run code (a module's constructors) from the tree it was built in.
static int candidates(candidate c[2]) {
    const char *env = zt_env_str(ZT_ENV_CUDA_MODULE);
    if (env && *env) {
        resolve(c[0].path, sizeof c[0].path, env);
        if (env[0] != '/')  // relative: say which file it named
            snprintf(c[0].label, sizeof c[0].label, "%.*s (%s)", PATH_MAX, env, c[0].path);
        else
            snprintf(c[0].label, sizeof c[0].label, "%.*s", PATH_MAX, env);
        return 1;
    }
    int n = 0;
    char exe[PATH_MAX];
    ssize_t k = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (k > 0) {
        exe[k] = 0;
        char *slash = strrchr(exe, '/');
        if (slash) *slash = 0;
        char p[PATH_MAX + 64];
        snprintf(p, sizeof p, "%s/%s", exe, ZT_CUDA_MODULE_FILE);
        resolve(c[n++].path, sizeof c[0].path, p);
        snprintf(p, sizeof p, "%s/../lib/zerotrain/%s", exe, ZT_CUDA_MODULE_FILE);
        resolve(c[n++].path, sizeof c[0].path, p);
    }
    for (int i = 0; i < n; i++) snprintf(c[i].label, sizeof c[i].label, "%s", c[i].path);
    return n;
}

const char *zt_cuda_module_find(char *buf, size_t len) {
    if (g_linked) return snprintf(buf, len, "linked in"), buf;
    candidate c[2];
    const int n = candidates(c);
    struct stat st;
    for (int i = 0; i < n; i++)
        if (stat(c[i].path, &st) == 0 && S_ISREG(st.st_mode)) return snprintf(buf, len, "%s", c[i].path), buf;
    return NULL;
}

static const zt_cuda_module *load(void) {
    if (g_linked) {
        snprintf(g_path, sizeof g_path, "linked in");
        return g_mod = check(g_linked, "linked in");
    }
    candidate c[2];
    const int n = candidates(c);
    for (int i = 0; i < n && !g_mod; i++) g_mod = try_open(&c[i]);
    if (!g_mod && !g_found) {
        zt_err("the CUDA backend is not available: this zerotrain was built without the GPU engine, or its module "
               "%s is not installed (it needs the CUDA toolkit and NCCL at configure time: docs/cuda.md; "
               "ZT_CUDA_MODULE names its file); looked for:%s",
               ZT_CUDA_MODULE_FILE, g_why);
        return NULL;
    }
    if (!g_mod) {
        zt_err("the CUDA backend is not available: %s was found but did not load%s:%s", ZT_CUDA_MODULE_FILE,
               g_dl_err ? " (a CUDA library it needs is missing or broken?)" : "", g_why);
        return NULL;
    }
    return g_mod;
}

const zt_cuda_module *zt_cuda_module_load(void) {
    if (g_mod) return g_mod;
    if (g_tried) {
        zt_err("%s", g_fail);
        return NULL;
    }
    g_tried = 1;
    if (!load()) {
        snprintf(g_fail, sizeof g_fail, "%s", zt_errmsg());
        return NULL;
    }
    return g_mod;
}

int zt_cuda_module_loaded(void) { return g_mod != NULL; }

const char *zt_cuda_module_describe(char *buf, size_t n) {
    if (!g_mod) return NULL;
    snprintf(buf, n, "%s (zerotrain %s, API %d)", g_path, g_mod->version, g_mod->api_version);
    return buf;
}

void zt_cuda_module_register(const zt_cuda_module *m) {
    if (!g_linked) g_linked = m;
}

int zt_cuda_driver_present(void) {
    return access("/proc/driver/nvidia/version", F_OK) == 0 || access("/dev/nvidiactl", F_OK) == 0;
}

int zt_cuda_comm_init(zt_comm **out, void *mpi_comm, int device, const zt_comm_opts *o) {
    const zt_cuda_module *m = zt_cuda_module_load();
    return m ? m->comm_init(out, mpi_comm, device, o) : -1;
}

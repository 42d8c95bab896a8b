/* gpunode lab stand-in for libcuda.so.1: cuInit and cuDeviceGetCount only, answering from
 * the lab host's simulated hardware as the real driver library would.
 *
 *   no nvidia module loaded                        -> 100 CUDA_ERROR_NO_DEVICE
 *   a module of another release than this library  -> 803 CUDA_ERROR_SYSTEM_DRIVER_MISMATCH
 *   NVSwitches on the board and no fabric manager
 *   running at the module's release                -> 802 CUDA_ERROR_SYSTEM_NOT_READY
 *
 * gpunode_lab/repo/libcuda.py builds it once, then writes each release over RELEASE. */
#include <stdio.h>
#include <string.h>
#include <stdlib.h>

#ifndef RELEASE
#define RELEASE "0"
#endif
/* writable and exported, so the compiler cannot fold comparisons with it: the lab writes
 * each release over the one built in */
char gpunode_lab_release[64] = RELEASE;

static int slurp(const char *path, char *buf, size_t size) {
    FILE *f = fopen(path, "r");
    size_t n;
    if (!f) return 0;
    n = fread(buf, 1, size - 1, f);
    fclose(f);
    buf[n] = 0;
    while (n && (buf[n - 1] == '\n' || buf[n - 1] == ' ')) buf[--n] = 0;
    return 1;
}

/* the integer after "KEY": in gpus.json, or -1 */
static long json_int(const char *json, const char *key) {
    const char *p = strstr(json, key);
    if (!p) return -1;
    p = strchr(p + strlen(key), ':');
    return p ? strtol(p + 1, NULL, 10) : -1;
}

int cuInit(unsigned int flags) {
    char module[64], gpus[8192], fm[64], pid[32], proc[64];
    (void)flags;
    if (!slurp("/sys/module/nvidia/version", module, sizeof module)) return 100;
    if (strcmp(module, gpunode_lab_release) != 0) return 803;
    if (!slurp("/etc/gpunode-lab/gpus.json", gpus, sizeof gpus)) return 100;
    if (json_int(gpus, "\"nvswitches\"") <= 0) return 0;
    if (!slurp("/run/nvidia-fabricmanager/version", fm, sizeof fm) || strcmp(fm, module) != 0)
        return 802;
    if (!slurp("/run/nvidia-fabricmanager/nv-fabricmanager.pid", pid, sizeof pid)) return 802;
    snprintf(proc, sizeof proc, "/proc/%s/stat", pid);
    if (!slurp(proc, gpus, sizeof gpus)) return 802;
    return 0;
}

int cuDeviceGetCount(int *count) {
    char gpus[8192];
    int rc = cuInit(0);
    if (rc) return rc;
    if (!slurp("/etc/gpunode-lab/gpus.json", gpus, sizeof gpus)) return 100;
    *count = (int)json_int(gpus, "\"count\"");
    return 0;
}

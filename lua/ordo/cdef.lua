-- ordo.cdef: every C declaration the Lua package uses, and the library.
--
-- The library is the path in the environment variable ORDO_LIB (the ordo
-- launcher sets it), else build/libordo.so relative to this file (a
-- checkout: lua/ordo/ -> ../../build/), else lib/libordo.so of an install
-- (share/ordo/lua/ordo/ -> ../../../../lib/).
local ffi = require "ffi"

-- Loaded a second time (package.loaded.ordo = nil, then require "ordo":
-- a reload in the REPL), the declarations are there already, and a type
-- declared again is an error ("attempt to redefine"): each is made once.
local declared = pcall(ffi.typeof, "ordo_ctx")
local function cdef(decls)
    if not declared then ffi.cdef(decls) end
end

cdef [[
/* ---- ordo.h ---- */
typedef struct { int dev_type; int dev_id; } ordo_ctx;
typedef struct ordo_engine ordo_engine;
typedef struct ordo_var ordo_var;
typedef struct ordo_engine_config {
    int kind, cpu_workers, cpu_priority_workers, gpu_workers, gpu_copy_workers,
        max_inflight, spin_us, profiler_autostart, push_inline_after, bulk_op_max_ns,
        run_now_max_elements;
} ordo_engine_config;
typedef struct ordo_run_ctx {
    ordo_ctx ctx; void *stream; int worker_id; ordo_engine *engine; void *op_;
} ordo_run_ctx;
typedef int (*ordo_sync_fn)(const ordo_run_ctx *rc, void *param);

ordo_engine *ordo_engine_default(void);
void         ordo_engine_get_config(ordo_engine *e, ordo_engine_config *out);
const char  *ordo_engine_kind_name(int kind);
ordo_var    *ordo_new_variable(ordo_engine *e);
int  ordo_push_sync(ordo_engine *e, ordo_sync_fn fn, void *param, void (*param_free)(void *),
                    ordo_ctx ctx, ordo_var *const *reads, int nreads,
                    ordo_var *const *writes, int nwrites, int prop, int priority, const char *name);
int  ordo_delete_variable(ordo_engine *e, ordo_sync_fn fn, void *param, ordo_ctx ctx, ordo_var *v);
int  ordo_wait_for_var(ordo_engine *e, ordo_var *v);
int  ordo_wait_to_write(ordo_engine *e, ordo_var *v);
int  ordo_wait_for_all(ordo_engine *e);
const char *ordo_last_error(void);
uint64_t    ordo_var_version(ordo_var *v);
int         ordo_var_failed(ordo_var *v);
int         ordo_file_kind(const char *path, unsigned *mode);
uint32_t    ordo_crc32(uint32_t crc, const void *data, size_t n);
long ordo_engine_pending(ordo_engine *e);
int  ordo_set_bulk_size(int n);
int  ordo_get_bulk_size(void);
int  ordo_bulk_flush(void);
int  ordo_profiler_start(ordo_engine *e);
int  ordo_profiler_stop(ordo_engine *e);
int  ordo_profiler_dump(ordo_engine *e, const char *path);
void ordo_profiler_clear(ordo_engine *e);
int  ordo_gpu_count(void);

/* ---- ordo_kernel.h ---- */
typedef struct ordo_view {
    void *data; int dtype; int ndim; int64_t shape[8]; int64_t strides[8];
} ordo_view;
typedef struct ordo_kernel_args {
    int nin, nout, nscalar, niparam;
    ordo_view in[4]; ordo_view out[2];
    double scalar[8]; int64_t iparam[12];
} ordo_kernel_args;
typedef int (*ordo_kernel_fn)(const ordo_run_ctx *rc, const ordo_kernel_args *args);
ordo_kernel_fn ordo_kernel_lookup(const char *name, int dev_type);
size_t ordo_dtype_size(int dtype);

/* ---- ordo_tensor.h ---- */
typedef struct ordo_storage {
    long refs; void *data; size_t nbytes; ordo_var *var; ordo_engine *engine; ordo_ctx ctx;
    uint64_t writes;
} ordo_storage;
typedef struct ordo_tensor {
    ordo_storage *storage; int64_t offset; int32_t dtype; int32_t ndim; ordo_ctx ctx;
    int64_t shape[8]; int64_t strides[8]; uint64_t id;
} ordo_tensor;

int64_t ordo_storage_live_bytes(void);
int64_t ordo_storage_live_count(void);
int64_t ordo_storage_total_bytes(void);
int     ordo_storage_gc_due(void);
void    ordo_storage_gc_done(void);
void    ordo_storage_gc_pace(int64_t heap_bytes);
void    ordo_storage_set_gc_threshold(int64_t bytes);

ordo_tensor *ordo_tensor_empty(ordo_engine *e, int dtype, int ndim, const int64_t *shape, ordo_ctx ctx);
ordo_tensor *ordo_tensor_empty_on(ordo_engine *e, int dtype, int ndim, const int64_t *shape,
                                  int dev_type, int dev_id);
ordo_tensor *ordo_tensor_empty_like(const ordo_tensor *t, int dtype);
ordo_tensor *ordo_tensor_as_strided(const ordo_tensor *t, int ndim, const int64_t *shape,
                                    const int64_t *strides, int64_t offset);
ordo_tensor *ordo_tensor_alias(const ordo_tensor *t);
void ordo_tensor_free(ordo_tensor *t);
int64_t ordo_tensor_numel(const ordo_tensor *t);
int     ordo_tensor_is_contiguous(const ordo_tensor *t);
void   *ordo_tensor_data(const ordo_tensor *t);
void    ordo_tensor_host_written(const ordo_tensor *t);
ordo_tensor *ordo_tensor_view(const char *op, const ordo_tensor *t, int ndim, const int64_t *shape);
ordo_tensor *ordo_tensor_transpose(const char *op, const ordo_tensor *t, int d1, int d2);
ordo_tensor *ordo_tensor_permute(const char *op, const ordo_tensor *t, int ndim, const int64_t *perm);
ordo_tensor *ordo_tensor_narrow(const char *op, const ordo_tensor *t, int dim, int64_t start, int64_t len);
ordo_tensor *ordo_tensor_select(const char *op, const ordo_tensor *t, int dim, int64_t index);
ordo_tensor *ordo_tensor_expand(const char *op, const ordo_tensor *t, int ndim, const int64_t *shape);
ordo_tensor *ordo_tensor_unsqueeze(const char *op, const ordo_tensor *t, int dim);
ordo_tensor *ordo_tensor_squeeze(const char *op, const ordo_tensor *t, int dim);
int ordo_tensor_broadcast_shape(const char *op, const ordo_tensor *a, const ordo_tensor *b, int64_t *out_shape);

int ordo_tensor_kernel_id(const char *name);
int ordo_tensor_kernel_available(int kid, int dev_type);
void ordo_tensor_kernel_cache_clear(void);
int ordo_tensor_push(int kid, const char *op, int flags,
                     ordo_tensor *const *in, int nin, ordo_tensor *const *out, int nout,
                     const double *scalars, int nscalar, const int64_t *iparams, int niparam);
int ordo_tensor_op1(int kid, const char *op, ordo_tensor *out, ordo_tensor *a, double s0);
int ordo_tensor_op2(int kid, const char *op, ordo_tensor *out, ordo_tensor *a, ordo_tensor *b);
int ordo_tensor_op3(int kid, const char *op, ordo_tensor *out, ordo_tensor *a, ordo_tensor *b, ordo_tensor *c);
ordo_tensor *ordo_tensor_binary(int kid, const char *op, ordo_tensor *a, ordo_tensor *b, int out_dtype);
int ordo_tensor_wait(const ordo_tensor *t);
const char *ordo_tensor_error(void);
int ordo_tensor_error_code(void);

typedef struct ordo_gpu_memory_stats {
    int64_t allocated_bytes, reserved_bytes, peak_allocated_bytes, peak_reserved_bytes,
            num_device_allocs, num_device_frees, cache_hits, cache_misses, oom_retries;
} ordo_gpu_memory_stats;
int ordo_gpu_get_memory_stats(int dev_id, ordo_gpu_memory_stats *out);
int ordo_gpu_empty_cache(int dev_id);
int64_t ordo_host_cached_bytes(void);
void    ordo_host_empty_cache(void);
int64_t ordo_pinned_live_bytes(void);
int64_t ordo_pinned_cached_bytes(void);
void    ordo_pinned_empty_cache(void);

ordo_engine *ordo_tensor_engine_create(const ordo_engine_config *cfg);
void         ordo_tensor_engine_close(ordo_engine *e);
int          ordo_tensor_engines_live(void);
size_t ordo_tensor_sizeof(const char *type_name);
char *ordo_tensor_profiler_summary(ordo_engine *e);
void  ordo_tensor_free_str(char *s);
]]

-- ---- ordo_shell.h: shell commands as async ops (ordo.engine.shell) ----
cdef [[
int ordo_push_shell(ordo_engine *e, const char *cmd, ordo_var *const *reads, int nreads,
                    ordo_var *const *writes, int nwrites, const char *name);
int ordo_shell_running(void);
]]

-- The directory of this file, absolute when the path it was loaded by is relative.
local function here()
    local src = debug.getinfo(1, "S").source
    local dir = src:sub(1, 1) == "@" and src:sub(2):match("^(.*)[/\\]") or "."
    if dir:sub(1, 1) ~= "/" then
        local pwd = os.getenv("PWD")
        if pwd and pwd ~= "" then dir = pwd .. "/" .. dir end
    end
    return dir
end

-- OpenBLAS starts its own thread pool when it is loaded, and those threads
-- spin for a while, taking a core from the engine's workers (which are where
-- ordo's parallelism comes from: the matmul kernel asks BLAS for one thread,
-- see kernels/cpu/matmul.c).  So the pool is sized before the library loads,
-- unless the user said otherwise.
ffi.cdef[[int setenv(const char *name, const char *value, int overwrite);]]
ffi.C.setenv("OPENBLAS_NUM_THREADS", os.getenv("ORDO_BLAS_THREADS") or "1", 0)

local dir = here()
local path = os.getenv("ORDO_LIB")
if not path or path == "" then
    path = dir .. "/../../build/libordo.so"
    local installed = dir .. "/../../../../lib/libordo.so"
    local f = io.open(path, "rb")
    if f then
        f:close()
    else
        f = io.open(installed, "rb")
        if f then
            f:close()
            path = installed
        end
    end
end
local ok, lib = pcall(ffi.load, path)
if not ok then
    error("ordo: cannot load the native library " .. path .. ": " .. tostring(lib) ..
          "\n(build it with `make` in the checkout, or point ORDO_LIB at libordo.so)", 0)
end
-- Held for the life of the Lua state: LuaJIT unloads (dlclose) a library
-- whose namespace is collected, and the finalizers of tensors, vars and
-- engines (ffi.gc) call into it.  A program that drops the package
-- (package.loaded.ordo = nil, as busted does between spec files) made both
-- garbage in the same cycle, and a finalizer run after the unload jumped
-- into unmapped code (a segfault at exit).  lua_close runs cdata
-- finalizers before unloading libraries.
debug.getregistry()["ordo: " .. path] = lib

-- The structs above are copies of the C headers: a copy that drifted from
-- the library would corrupt memory, so check them now.
for _, name in ipairs({"ordo_engine_config", "ordo_tensor", "ordo_storage", "ordo_view",
                       "ordo_kernel_args", "ordo_ctx", "ordo_run_ctx", "ordo_gpu_memory_stats"}) do
    local want = tonumber(lib.ordo_tensor_sizeof(name))
    if want ~= ffi.sizeof(name) then
        error(("ordo: lua/ordo/cdef.lua declares %s in %d bytes but %s has %d: update the cdef from src/*.h")
              :format(name, ffi.sizeof(name), path, want), 0)
    end
end

-- ---- libc and zlib: ordo.data (IDX files, gzip) and ordo.progress ----
-- A redeclared C function keeps its first declaration, so another module
-- that declares clock_gettime with its own timespec type still works with
-- this one (void *); ordo.progress casts it to its own pointer type.
-- Handles are `struct gzFile_s *` without zlib's typedef for the same reason.
cdef [[
typedef struct ordo_timespec { long tv_sec; long tv_nsec; } ordo_timespec;
int clock_gettime(int clk, void *ts);
int nanosleep(const void *req, void *rem);
int isatty(int fd);
char *realpath(const char *path, char *resolved);
int chmod(const char *path, unsigned mode);

struct gzFile_s;
struct gzFile_s *gzopen(const char *path, const char *mode);
int gzbuffer(struct gzFile_s *file, unsigned size);
int gzread(struct gzFile_s *file, void *buf, unsigned len);
int gzwrite(struct gzFile_s *file, const void *buf, unsigned len);
int gzclose(struct gzFile_s *file);
const char *gzerror(struct gzFile_s *file, int *errnum);
const char *zlibVersion(void);
unsigned long crc32(unsigned long crc, const unsigned char *buf, unsigned len);
]]

-- zlib is loaded on first use, so ordo works where it is not installed:
-- zlib() returns the library, or nil and the reason.
local zlib_lib, zlib_err
local function zlib()
    if zlib_lib then return zlib_lib end
    if zlib_err then return nil, zlib_err end
    local ok, l = pcall(ffi.load, "z")
    if not ok then
        local ok2, l2 = pcall(ffi.load, "libz.so.1")
        if not ok2 then
            zlib_err = "cannot load zlib (libz.so.1): " .. tostring(l2) ..
                       " (install zlib: apt-get install zlib1g)"
            return nil, zlib_err
        end
        l = l2
    end
    zlib_lib = l
    debug.getregistry()["ordo: zlib"] = l -- (as libordo above: gzip handles' finalizers call it)
    return l
end

return {
    ffi = ffi,
    C = lib,
    lib_path = path,
    lua_dir = dir, -- lua/ordo: error positions skip frames from these files
    zlib = zlib, -- zlib(): the zlib library loaded lazily, or nil and why
    -- constants of ordo.h / ordo_kernel.h / ordo_tensor.h
    CPU = 1, GPU = 2, CPU_PINNED = 3,
    PROP_ASYNC = 4, PROP_NO_SKIP = 0x100,
    F32 = 0, F64 = 1, I32 = 2, I64 = 3, U8 = 4,
    TP_BROADCAST = 1, TP_SAME_DTYPE = 2, TP_CROSS_DEVICE = 4, TP_NAMED = 8,
    TERR_NOT_VIEWABLE = 100,
    ERR_NO_DEVICE = 5, ERR_NOMEM = 6,
}

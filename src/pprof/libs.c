/*
 * libs.c - libdw, libelf, protobuf-c, zlib and libm, loaded at their first use
 * (see libs.h and pb_dl.h).
 */
#include "pprof/libs.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

#include "memstats.h"
#include "pprof/pb_dl.h"

mt_dw_t mt_dw;
mt_z_t mt_z;
mt_m_t mt_m;

/* protobuf-c's functions the generated code calls (pb_dl.h). */
#define MT_LIBS_PB(X)                                                          \
  X(message_get_packed_size)                                                   \
  X(message_pack)                                                              \
  X(message_pack_to_buffer)                                                    \
  X(message_unpack)                                                            \
  X(message_free_unpacked)

#define PB_PTR(f) __typeof__(mt_pb_##f) *f;
static struct { MT_LIBS_PB(PB_PTR) } pb;

/* The one empty string of profile.proto's descriptors and initialisers. */
const char mt_pb_empty_string[] = "";

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static char error[512];
static int have_error;

/* What a library is, for the error. */
typedef struct lib_s {
  const char *soname;
  const char *package; /* what to install */
} lib_t;

static const lib_t LIB_DW = {
    "libdw.so.1", "elfutils' libdw; Debian and Ubuntu: libdw1, Fedora: "
                  "elfutils-libs"};
static const lib_t LIB_ELF = {
    "libelf.so.1", "elfutils' libelf; Debian and Ubuntu: libelf1, Fedora: "
                   "elfutils-libelf"};
static const lib_t LIB_PB = {"libprotobuf-c.so.1",
                             "protobuf-c; Debian and Ubuntu: libprotobuf-c1, "
                             "Fedora: protobuf-c"};
static const lib_t LIB_Z = {"libz.so.1",
                            "zlib; Debian and Ubuntu: zlib1g, Fedora: zlib"};
static const lib_t LIB_M = {"libm.so.6",
                            "the C library's libm; Debian and Ubuntu: libc6, "
                            "Fedora: glibc"};

/* Opens lib (under lock). Returns its handle, or NULL with the error
 * set. */
static void *open_lib(const lib_t *lib) {
  void *h = dlopen(lib->soname, RTLD_NOW | RTLD_LOCAL);
  const char *why;

  if (h == NULL) {
    why = dlerror();
    snprintf(error, sizeof error, "%s (%s) cannot be loaded: %s", lib->soname,
             lib->package, why != NULL ? why : "not found");
    have_error = 1;
  }
  return h;
}

/* Finds name in h into *fn (under lock). Returns 0, or -1 with the error
 * set: the library installed is older than memtop needs. */
static int find(void *h, const lib_t *lib, const char *name, void **fn) {
  *fn = dlsym(h, name);
  if (*fn != NULL)
    return 0;
  snprintf(error, sizeof error,
           "%s (%s) has no %s: it is older than memtop needs", lib->soname,
           lib->package, name);
  have_error = 1;
  return -1;
}

#define FIND(table, lib, h, f)                                                 \
  if (rc == 0)                                                                 \
    rc = find(h, lib, #f, (void **)&table.f);
#define FIND_DW(f) FIND(mt_dw, &LIB_DW, dw, f)
#define FIND_ELF(f) FIND(mt_dw, &LIB_ELF, elf, f)
#define FIND_Z(f) FIND(mt_z, &LIB_Z, z, f)
#define FIND_M(f) FIND(mt_m, &LIB_M, m, f)
/* pb's members are protobuf-c's names without their prefix. */
#define FIND_PB(f)                                                             \
  if (rc == 0)                                                                 \
    rc = find(pbh, &LIB_PB, "protobuf_c_" #f, (void **)&pb.f);

/* A library once loaded stays so: what it made (a Dwfl, a message) may
 * outlive any caller. A load that failed is not tried again. */
static int dw_state, pb_state, m_state; /* 1 loaded, -1 failed, 0 not tried */

int mt_libs_dw(void) {
  int state = __atomic_load_n(&dw_state, __ATOMIC_ACQUIRE);
  void *dw, *elf;
  int rc = 0;

  if (state != 0)
    return state > 0 ? 0 : MS_ENOSYS;
  pthread_mutex_lock(&lock);
  if (dw_state == 0) {
    /* libelf first, though libdw's NEEDED would load it: where it is
     * missing, the error names it, not libdw. */
    if ((elf = open_lib(&LIB_ELF)) == NULL || (dw = open_lib(&LIB_DW)) == NULL)
      rc = -1;
    else {
      MT_LIBS_DW(FIND_DW)
      MT_LIBS_ELF(FIND_ELF)
    }
    __atomic_store_n(&dw_state, rc == 0 ? 1 : -1, __ATOMIC_RELEASE);
  }
  state = dw_state;
  pthread_mutex_unlock(&lock);
  return state > 0 ? 0 : MS_ENOSYS;
}

int mt_libs_pb(void) {
  int state = __atomic_load_n(&pb_state, __ATOMIC_ACQUIRE);
  void *pbh, *z;
  int rc = 0;

  if (state != 0)
    return state > 0 ? 0 : MS_ENOSYS;
  pthread_mutex_lock(&lock);
  if (pb_state == 0) {
    if ((pbh = open_lib(&LIB_PB)) == NULL || (z = open_lib(&LIB_Z)) == NULL)
      rc = -1;
    else {
      MT_LIBS_PB(FIND_PB)
      MT_LIBS_Z(FIND_Z)
    }
    __atomic_store_n(&pb_state, rc == 0 ? 1 : -1, __ATOMIC_RELEASE);
  }
  state = pb_state;
  pthread_mutex_unlock(&lock);
  return state > 0 ? 0 : MS_ENOSYS;
}

int mt_libs_m(void) {
  int state = __atomic_load_n(&m_state, __ATOMIC_ACQUIRE);
  void *m;
  int rc = 0;

  if (state != 0)
    return state > 0 ? 0 : MS_ENOSYS;
  pthread_mutex_lock(&lock);
  if (m_state == 0) {
    if ((m = open_lib(&LIB_M)) == NULL)
      rc = -1;
    else {
      MT_LIBS_M(FIND_M)
    }
    __atomic_store_n(&m_state, rc == 0 ? 1 : -1, __ATOMIC_RELEASE);
  }
  state = m_state;
  pthread_mutex_unlock(&lock);
  return state > 0 ? 0 : MS_ENOSYS;
}

const char *mt_libs_error(void) {
  const char *e;

  pthread_mutex_lock(&lock);
  e = have_error ? error : NULL;
  pthread_mutex_unlock(&lock);
  return e;
}

/* ---- protobuf-c under memtop's names (pb_dl.h) ---- */

/* With no library, nothing was unpacked and nothing is packed: a writer
 * checks mt_libs_pb() first and says why. */
size_t mt_pb_message_get_packed_size(const ProtobufCMessage *m) {
  return mt_libs_pb() == 0 ? pb.message_get_packed_size(m) : 0;
}

size_t mt_pb_message_pack(const ProtobufCMessage *m, uint8_t *out) {
  return mt_libs_pb() == 0 ? pb.message_pack(m, out) : 0;
}

size_t mt_pb_message_pack_to_buffer(const ProtobufCMessage *m,
                                    ProtobufCBuffer *buf) {
  return mt_libs_pb() == 0 ? pb.message_pack_to_buffer(m, buf) : 0;
}

ProtobufCMessage *mt_pb_message_unpack(const ProtobufCMessageDescriptor *d,
                                       ProtobufCAllocator *a, size_t len,
                                       const uint8_t *data) {
  return mt_libs_pb() == 0 ? pb.message_unpack(d, a, len, data) : NULL;
}

void mt_pb_message_free_unpacked(ProtobufCMessage *m, ProtobufCAllocator *a) {
  if (mt_libs_pb() == 0)
    pb.message_free_unpacked(m, a);
}

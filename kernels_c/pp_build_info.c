/* What this library was compiled against, for the Python loader's ABI preflight.
 * Compiled into every library that is loaded into the engines, learners' ones included. */
#include "pp_util.h"

#if defined(MPI_ABI_VERSION)
#define PP_VENDOR "MPI-ABI"
#define PP_HANDLE "pointer"
#elif defined(OPEN_MPI)
#define PP_VENDOR "Open MPI"
#define PP_HANDLE "pointer"
#elif defined(MPICH_VERSION)
#define PP_VENDOR "MPICH"
#define PP_HANDLE "int"
#else
#define PP_VENDOR "unknown"
#define PP_HANDLE "unknown"
#endif

#if defined(MPICH_VERSION)
#define PP_VENDOR_VERSION MPICH_VERSION
#elif defined(OMPI_MAJOR_VERSION)
#define PP_STR2(x) #x
#define PP_STR(x) PP_STR2(x)
#define PP_VENDOR_VERSION                                                                       \
    PP_STR(OMPI_MAJOR_VERSION) "." PP_STR(OMPI_MINOR_VERSION) "." PP_STR(OMPI_RELEASE_VERSION)
#else
#define PP_VENDOR_VERSION "unknown"
#endif

/* Kept in the binary as plain text so the Python loader can read it without loading us. */
static const char pp_info[] =
    "PP_BUILD_INFO:vendor=" PP_VENDOR ";version=" PP_VENDOR_VERSION ";handle=" PP_HANDLE ";";

const char *pp_build_info(void) { return pp_info; }

#define PP_STR_(x) #x
#define PP_STR(x) PP_STR_(x)
#define PP_ERR_ENTRY(name) #name "=" PP_STR(PP_##name) ":" PP_##name##_TEXT ";"

/* Kept in the binary as plain text too, like pp_info. */
static const char pp_interface_text[] =
    "PP_INTERFACE:"
    "SHARED_BUFFER=" PP_STR(PP_SHARED_BUFFER) ";"
    "CORRUPT_ECHO=" PP_STR(PP_CORRUPT_ECHO) ";"
    "BATCH_SHIFT=" PP_STR(PP_BATCH_SHIFT) ";"
    "TAG=" PP_STR(PP_TAG) ";"
    "TAG_READY=" PP_STR(PP_TAG_READY) ";"
    PP_ERR_ENTRY(ERR_ARGS)
    PP_ERR_ENTRY(ERR_ODD_RANKS)
    PP_ERR_ENTRY(ERR_NO_PEER)
    PP_ERR_ENTRY(ERR_ALLOC)
    PP_ERR_ENTRY(ERR_MPI)
    "KERNEL_blocking=pp_pingpong_blocking;"
    "KERNEL_nonblocking=pp_pingpong_nonblocking;"
    "KERNEL_pairwise=pp_pairwise;"
    "KERNEL_bw=pp_bw;"
    "KERNEL_bibw=pp_bibw;"
    "END;";

const char *pp_interface(void) { return pp_interface_text; }

int pp_sizeof_comm(void) { return (int)sizeof(MPI_Comm); }

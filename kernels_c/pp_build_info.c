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

int pp_sizeof_comm(void) { return (int)sizeof(MPI_Comm); }

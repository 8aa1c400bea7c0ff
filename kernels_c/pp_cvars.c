/* MPI's control variables as the library itself reports them, through the MPI tool interface
 * (MPI_T): the settings that decide a protocol (a shared-memory cell size, a single-copy
 * threshold) read from the MPI that runs, with the values in effect in this process. */
#include <stdio.h>
#include <string.h>

#include "pp_util.h"

/* The value of control variable `index` as text in `text` (`cap` bytes): 0 when read, 1 when it
 * is bound to an MPI object or of a type not shown here (the text says which), <0 on error. */
static int cvar_value(int index, MPI_Datatype type, int bind, char *text, size_t cap)
{
    if (bind != MPI_T_BIND_NO_OBJECT) {
        snprintf(text, cap, "(per object)");
        return 1;
    }
    MPI_T_cvar_handle handle;
    int count = 0;
    if (MPI_T_cvar_handle_alloc(index, NULL, &handle, &count) != MPI_SUCCESS)
        return -1;
    char buffer[512];
    int rc = 0;
    if (count < 1 || (type == MPI_CHAR && count >= (int)sizeof buffer) ||
        (type != MPI_CHAR && count != 1)) {
        snprintf(text, cap, "(%d values)", count);
        rc = 1;
    } else if (MPI_T_cvar_read(handle, buffer) != MPI_SUCCESS) {
        rc = -1;
    } else if (type == MPI_INT) {
        snprintf(text, cap, "%d", *(int *)buffer);
    } else if (type == MPI_UNSIGNED) {
        snprintf(text, cap, "%u", *(unsigned *)buffer);
    } else if (type == MPI_UNSIGNED_LONG) {
        snprintf(text, cap, "%lu", *(unsigned long *)buffer);
    } else if (type == MPI_UNSIGNED_LONG_LONG) {
        snprintf(text, cap, "%llu", *(unsigned long long *)buffer);
    } else if (type == MPI_COUNT) {
        snprintf(text, cap, "%lld", (long long)*(MPI_Count *)buffer);
    } else if (type == MPI_DOUBLE) {
        snprintf(text, cap, "%g", *(double *)buffer);
    } else if (type == MPI_CHAR) {
        buffer[count] = '\0';
        snprintf(text, cap, "%.200s", buffer);
    } else {
        snprintf(text, cap, "(a type not shown)");
        rc = 1;
    }
    MPI_T_cvar_handle_free(&handle);
    return rc;
}

/* Writes "NAME=VALUE\n" into out (cap bytes, always terminated) for every control variable whose
 * name contains `match` ("" for all of them). Returns how many were written, or PP_ERR_MPI when
 * the tool interface cannot be started, or PP_ERR_ARGS. Safe before or after MPI_Init. */
int pp_cvars(const char *match, char *out, int cap)
{
    if (match == NULL || out == NULL || cap < 1)
        return PP_ERR_ARGS;
    out[0] = '\0';
    int provided = 0, num = 0;
    if (MPI_T_init_thread(MPI_THREAD_SINGLE, &provided) != MPI_SUCCESS)
        return PP_ERR_MPI;
    MPI_T_cvar_get_num(&num);
    size_t used = 0;
    int shown = 0;
    for (int i = 0; i < num; i++) {
        char name[256], desc[8];
        int name_len = sizeof name, desc_len = sizeof desc, verbosity, bind, scope;
        MPI_Datatype type;
        MPI_T_enum enumtype;
        if (MPI_T_cvar_get_info(i, name, &name_len, &verbosity, &type, &enumtype, desc, &desc_len,
                                &bind, &scope) != MPI_SUCCESS)
            continue;
        if (strstr(name, match) == NULL)
            continue;
        char value[256];
        if (cvar_value(i, type, bind, value, sizeof value) < 0)
            snprintf(value, sizeof value, "(unreadable)");
        int n = snprintf(out + used, (size_t)cap - used, "%s=%s\n", name, value);
        if (n < 0 || used + (size_t)n >= (size_t)cap)
            break;
        used += (size_t)n;
        shown++;
    }
    MPI_T_finalize();
    return shown;
}

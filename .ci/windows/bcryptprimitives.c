/*
 * Stand-in for Windows' bcryptprimitives.dll, for running Windows builds under Debian's Wine 8.0.
 *
 * Rust's std (since 1.78) fills its hash-map keys from ProcessPrng, which bcryptprimitives.dll
 * exports on Windows 10 and later. Wine gained that DLL only in 8.13, so under Wine 8.0 every
 * Rust program fails to start (status c0000135, DLL not found). This DLL exports ProcessPrng and
 * forwards to RtlGenRandom (advapi32's SystemFunction036), which every Wine has.
 *
 * Built by .ci/windows/wine-test with mingw-w64; used only in the CI's Wine prefix, never shipped.
 */
#include <windows.h>

BOOLEAN WINAPI SystemFunction036(PVOID buffer, ULONG length);

BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T length)
{
    /* RtlGenRandom takes a ULONG length; feed it in pieces so any SIZE_T works. */
    while (length > 0) {
        ULONG chunk = length > 0x40000000 ? 0x40000000 : (ULONG)length;
        if (!SystemFunction036(data, chunk))
            return FALSE;
        data += chunk;
        length -= chunk;
    }
    return TRUE;
}

# abi-probe.py: getpid through each x86_64 system call ABI (i386's int 0x80,
# x32, the native one), each in a child; prints "ABI exit N" (0: the pid
# came back) or "ABI signal N". Run on the host with python3, it tells what
# this kernel offers; run in the sandbox (it is valid Sage too), what the
# sandbox lets through.
import ctypes
import mmap
import os

CODE = {
    "i386": [0xb8, 20, 0, 0, 0, 0xcd, 0x80, 0xc3],       # mov eax, 20; int 0x80; ret
    "x32": [0xb8, 0x27, 0, 0, 0x40, 0x0f, 0x05, 0xc3],   # mov eax, 39|x32 bit; syscall; ret
    "x86_64": [0xb8, 39, 0, 0, 0, 0x0f, 0x05, 0xc3],     # mov eax, 39; syscall; ret
}


def getpid_through(code):
    pid = os.fork()
    if pid == 0:
        buf = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
        buf.write(bytes(code))
        f = ctypes.CFUNCTYPE(ctypes.c_long)(ctypes.addressof(ctypes.c_char.from_buffer(buf)))
        os._exit(0 if f() == os.getpid() else 1)
    status = os.waitpid(pid, 0)[1]
    if os.WIFSIGNALED(status):
        return "signal %d" % os.WTERMSIG(status)
    return "exit %d" % os.WEXITSTATUS(status)


for name in ("i386", "x32", "x86_64"):
    print(name, getpid_through(CODE[name]))

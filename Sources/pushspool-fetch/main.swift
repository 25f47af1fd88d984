@preconcurrency import Glibc
import PushFetch

// Exit without unwinding: libcurl and libvips threads may still be running.
_exit(FetchMain.run(arguments: Array(CommandLine.arguments.dropFirst())))

@preconcurrency import Glibc
import PushFetchServer

// Exit without unwinding: libcurl and libvips threads may still be running.
_exit(FetchMain.run(arguments: Array(CommandLine.arguments.dropFirst())))

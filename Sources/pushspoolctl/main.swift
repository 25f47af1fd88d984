import Glibc
import PushspoolCtl

exit(PushspoolCtl.main(Array(CommandLine.arguments.dropFirst())))

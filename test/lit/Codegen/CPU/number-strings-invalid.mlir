// RUN: sits-opt %s --sits-cpu-number-strings --verify-diagnostics -split-input-file

// The position name of a string is held by a symbol that is not a private
// string: nothing is renamed and the pass says why.
// expected-error @+1 {{cannot rename to 'assert_msg_0': the name is taken}}
llvm.mlir.global private constant @assert_msg_7("first\00") {addr_space = 0 : i32}
llvm.func @assert_msg_0() {
  llvm.return
}

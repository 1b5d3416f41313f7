// The chapter 6 library: the promoted (fastest validated) version of each kernel lab, for the trainer's
// --kernels fused. Each lab adds its sources to lab_ch06 from its own kernels/NN_name/CMakeLists.txt.

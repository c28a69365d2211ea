"""The process real TensorFlow runs in, for every command that starts one (a capture, a harvest,
a profile, a runtime check): what it may see, how long it may take, and what it leaves behind.

:mod:`jitsim.tfprocess.sandbox` holds the environment a TF process gets (no secrets, its own
home and temporary directory, no network where the system allows a private network
namespace), the preamble every runner starts with (it dies with jitsim, and at its deadline),
and the reaper that kills it and removes its files when jitsim itself is killed.
"""

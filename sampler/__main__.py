from sampler.start import entry

entry()

// placeholder until the CPU ops land

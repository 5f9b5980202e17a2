"""Sites: the settings schema, finding and loading a site, the hardware of
its partitions, Spack bootstrapped from a kit, and the glue a site's ReFrame
configuration calls."""

"""Sites: the settings schema, finding and loading a site, the hardware of
its partitions, and the glue a site's ReFrame configuration calls."""

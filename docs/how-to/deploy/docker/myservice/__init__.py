"""myservice: the application whose jobs Headgate runs."""
